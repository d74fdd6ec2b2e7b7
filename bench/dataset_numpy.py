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
Needs Debian's python3-numpy (/usr/bin/python3).
"""
import hashlib
import json
import os
import sqlite3
import sys
import time
import warnings

import numpy as np


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
    data, spec_path, out_dir = sys.argv[1], sys.argv[2], sys.argv[3]
    spec = json.load(open(spec_path))
    t0 = time.time()
    db = sqlite3.connect(os.path.join(data, "aml.db"))
    beat_us = spec["beatMs"] * 1000
    H, F, stride = spec["historySteps"], spec["horizonSteps"], spec.get("stride", 1)
    cl = spec.get("cleaning", {})
    hw = cl.get("hampel", {}).get("windowMs", 5 * spec["beatMs"]) * 1000
    hk = cl.get("hampel", {}).get("threshold", 3)
    max_gap = cl.get("maxInterpMs", 3 * spec["beatMs"]) * 1000 // beat_us
    nodes = spec["nodes"]
    order = [n for role in ("control", "disturbance", "feature", "target") for n in nodes if n["role"] == role]
    ids = [n["nodeId"] for n in order]
    ctrl = [j for j, n in enumerate(order) if n["role"] == "control"]
    tgt = [j for j, n in enumerate(order) if n["role"] == "target"]
    info = {r[0]: r[1:] for r in db.execute("SELECT id, pk, min, max FROM nodes")}
    runs = db.execute("SELECT id, started_ms, ended_ms FROM runs WHERE recipe_id=? AND status='ended' ORDER BY started_ms",
                      (spec["recipeId"],)).fetchall()
    grids = []
    samples = 0
    for run_id, start_ms, end_ms in runs:
        ctxs = [r[0] for r in db.execute("SELECT pk FROM sample_ctx WHERE run=?", (run_id,))]
        q = "SELECT ts, value, state FROM samples WHERE node=? AND ts>=? AND ts<=? AND ctx IN (%s) ORDER BY ts" % ",".join("?" * len(ctxs))
        k0 = (start_ms * 1000) // beat_us
        nb = (end_ms * 1000 + 999) // beat_us - k0 + 1
        cols = []
        for nid in ids:
            pk, mn, mx = info[nid]
            rows = db.execute(q, (pk, start_ms * 1000, end_ms * 1000 + 999, *ctxs)).fetchall()
            samples += len(rows)
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
            keep = ~hampel(ts, xs, hw, hk)
            ts, xs = ts[keep], xs[keep]
            b = ts // beat_us - k0
            cnt = np.bincount(b, minlength=nb)[:nb]
            tot = np.bincount(b, weights=xs, minlength=nb)[:nb]
            col = np.full(nb, np.nan)
            obs = cnt > 0
            col[obs] = tot[obs] / cnt[obs]
            idx = np.flatnonzero(obs)
            if len(idx) > 1 and max_gap > 0:
                gaps = np.diff(idx) - 1
                for a, g in zip(idx[:-1][(gaps > 0) & (gaps <= max_gap)], gaps[(gaps > 0) & (gaps <= max_gap)]):
                    col[a + 1:a + 1 + g] = np.interp(np.arange(a + 1, a + 1 + g), [a, a + g + 1], [col[a], col[a + g + 1]])
            cols.append(col)
        g = np.stack(cols, axis=1)
        fin = np.isfinite(g)
        lo = max(int(np.argmax(fin[:, j])) for j in range(len(ids)))
        hi = min(nb - int(np.argmax(fin[::-1, j])) for j in range(len(ids)))
        if hi - lo >= H + F + 2:
            grids.append((run_id, (k0 + lo) * beat_us, g[lo:hi].astype(np.float32)))
    rng = np.random.default_rng(spec.get("split", {}).get("seed", 1))
    perm = rng.permutation(len(grids))
    nval = round(len(grids) * spec.get("split", {}).get("valRatio", 0))
    ntest = round(len(grids) * spec.get("split", {}).get("testRatio", 0))
    split = {}
    for i, p in enumerate(perm):
        split[grids[p][0]] = "val" if i < nval else ("test" if i < nval + ntest else "train")
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
    stats = {k: (np.nanmean(arrays[k][:ntrain].reshape(-1, arrays[k].shape[-1]), axis=0).tolist(),
                 np.nanstd(arrays[k][:ntrain].reshape(-1, arrays[k].shape[-1]), axis=0).tolist()) for k in ("x", "u", "y")}
    os.makedirs(out_dir, exist_ok=True)
    h = hashlib.sha256()
    total = 0
    for k, a in arrays.items():
        b = a.astype("<f8" if k == "timestamps" else "<f4").tobytes()
        total += len(b)
        with open(os.path.join(out_dir, k + ".bin"), "wb") as f:
            f.write(b)
            f.flush()
            os.fsync(f.fileno())
        h.update(b)
    json.dump({"norm": stats}, open(os.path.join(out_dir, "stats.json"), "w"))
    print(json.dumps({"seconds": time.time() - t0, "samples": samples, "windows": len(arrays["x"]),
                      "arrayBytes": total, "sha256": h.hexdigest()}))


if __name__ == "__main__":
    main()
