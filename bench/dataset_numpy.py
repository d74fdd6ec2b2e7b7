#!/usr/bin/python3
"""Reference dataset pipeline in plain numpy, the comparison side of
bench/dataset.sh: the same work as `aml dataset build` on the same store
(bench/dataset-spec.json), written the way a data scientist would with
numpy and the standard library: read every sample of the spec's nodes and
the recipe's ended runs from the SQLite store, clean (state filter, range,
two-sided time-windowed Hampel with the same rule and noise floor), align
onto the epoch grid (bucket means), interpolate short gaps, cut each run's
common range, cut windows (H history, F horizon, stride) whose rows are
complete, split by run, compute train-only normalisation statistics, write
x/u/y/timestamps/mask as little-endian arrays and hash them (sha256).

It is vectorised where numpy allows (one sliding-window view per node and
run for the Hampel medians, bincount for bucket means, np.interp for gaps);
it is not a byte-for-byte copy of AML's format (the split is by run, seeded
differently), so only the amount of work and the window count compare.

Usage: dataset_numpy.py DATA_DIR SPEC.json OUT_DIR   (prints JSON)
Needs Debian's python3-numpy (/usr/bin/python3). Reading the spec and the
store, the split and the output are bench/dataset_ref.py's, shared by both
reference pipelines.
"""
import sys
import warnings

import numpy as np

from dataset_ref import Job


def hampel(ts, xs, w, k):
    """Outlier flags of the two-sided time-windowed Hampel rule."""
    n = len(xs)
    out = np.zeros(n, dtype=bool)
    if n < 3 or w <= 0 or k <= 0:
        return out
    level = np.median(xs)
    noise = 1.4826 * np.median(np.abs(np.diff(xs))) / np.sqrt(2) if n >= 2 else 0.0
    floor = max(noise, 1e-9 * max(1.0, abs(level)))
    lo = np.searchsorted(ts, ts - w, side="left")    # left side [t-w, t)
    le = np.searchsorted(ts, ts, side="left")
    rs = np.searchsorted(ts, ts, side="right")       # right side (t, t+w]
    r = np.searchsorted(ts, ts + w, side="right")
    width = int(max((le - lo).max(), (r - rs).max(), 1))
    pad = np.concatenate([np.full(width, np.nan), xs, np.full(width, np.nan)])
    view = np.lib.stride_tricks.sliding_window_view(pad, width)  # view[i] = pad[i:i+width]
    verdicts = []
    for start, end in ((lo, le), (rs, r)):
        cnt = end - start
        win = view[start + width].copy()  # pad[start+width : start+2*width] = xs[start : start+width]
        win[np.arange(width)[None, :] >= cnt[:, None]] = np.nan
        with np.errstate(all="ignore"):
            med = np.nanmedian(win, axis=1)
            mad = np.nanmedian(np.abs(win - med[:, None]), axis=1)
        sigma = np.maximum(1.4826 * mad, floor)
        # a side with fewer than 2 points does not vote (agrees)
        verdicts.append((cnt >= 2) & (np.abs(xs - med) > k * sigma))
    out = verdicts[0] & verdicts[1]
    return out


def main():
    warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN Hampel windows at series ends
    job = Job(*sys.argv[1:4])
    H, F, stride, beat_us, ids, ctrl, tgt = job.H, job.F, job.stride, job.beat_us, job.ids, job.ctrl, job.tgt
    grids = []
    for run_id, k0, nb, rows_of in job.runs():
        cols = []
        for nid in ids:
            mn, mx, rows = rows_of(nid)
            if not rows:
                cols.append(np.full(nb, np.nan))
                continue
            ts = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            xs = np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))
            ok = np.fromiter((r[2] is None for r in rows), dtype=bool, count=len(rows))
            ok &= np.isfinite(xs)
            if mn is not None:
                ok &= xs >= mn
            if mx is not None:
                ok &= xs <= mx
            ts, xs = ts[ok], xs[ok]
            keep = ~hampel(ts, xs, job.hw, job.hk)
            ts, xs = ts[keep], xs[keep]
            b = ts // beat_us - k0
            cnt = np.bincount(b, minlength=nb)[:nb]
            tot = np.bincount(b, weights=xs, minlength=nb)[:nb]
            col = np.full(nb, np.nan)
            obs = cnt > 0
            col[obs] = tot[obs] / cnt[obs]
            idx = np.flatnonzero(obs)
            if len(idx) > 1 and job.max_gap > 0:
                gaps = np.diff(idx) - 1
                for a, g in zip(idx[:-1][(gaps > 0) & (gaps <= job.max_gap)], gaps[(gaps > 0) & (gaps <= job.max_gap)]):
                    col[a + 1:a + 1 + g] = np.interp(np.arange(a + 1, a + 1 + g), [a, a + g + 1], [col[a], col[a + g + 1]])
            cols.append(col)
        g = np.stack(cols, axis=1)
        fin = np.isfinite(g)
        lo = max(int(np.argmax(fin[:, j])) for j in range(len(ids)))
        hi = min(nb - int(np.argmax(fin[::-1, j])) for j in range(len(ids)))
        if hi - lo >= H + F + 2:
            grids.append((run_id, (k0 + lo) * beat_us, g[lo:hi].astype(np.float32)))
    split = job.split(grids)
    xs, us, ys, tss, masks = [], [], [], [], []
    ntrain = 0
    for part in ("train", "val", "test"):
        for run_id, start_us, g in grids:
            if split[run_id] != part:
                continue
            bad = np.concatenate([[0], np.cumsum(~np.isfinite(g).all(axis=1))])
            badct = np.concatenate([[0], np.cumsum(~np.isfinite(g[:, ctrl + tgt]).all(axis=1))])
            t = np.arange(H, len(g) - F + 1, stride)
            t = t[(bad[t] - bad[t - H] == 0) & (badct[t + F] - badct[t] == 0)]
            if len(t) == 0:
                continue
            if part == "train":
                ntrain += len(t)
            hist = np.lib.stride_tricks.sliding_window_view(g, H, axis=0)[t - H]     # [n, nAll, H]
            fut = np.lib.stride_tricks.sliding_window_view(g, F, axis=0)[t]          # [n, nAll, F]
            xs.append(np.ascontiguousarray(hist.transpose(0, 2, 1)))
            us.append(np.ascontiguousarray(fut[:, ctrl, :].transpose(0, 2, 1)))
            ys.append(np.ascontiguousarray(fut[:, tgt, :].transpose(0, 2, 1)))
            steps = (t[:, None] - H + np.arange(H + F)[None, :])
            tss.append((start_us + steps * beat_us) / 1000.0)
            masks.append(np.ones((len(t), H + F), dtype=np.float32))
    arrays = {"x": np.concatenate(xs), "u": np.concatenate(us), "y": np.concatenate(ys),
              "timestamps": np.concatenate(tss), "mask": np.concatenate(masks)}
    job.write(arrays, ntrain)


if __name__ == "__main__":
    main()
