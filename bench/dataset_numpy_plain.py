#!/usr/bin/python3
"""Straightforward numpy dataset pipeline: the comparison side that issue 22
asks for ("≥ 10× faster than a straightforward numpy implementation of the
same pipeline"), beside bench/dataset_numpy.py, which is the same pipeline
vectorised as far as numpy allows.

It is written the way a data scientist would write it the first time:
sqlite3 reads into numpy arrays, then a loop over runs and nodes, a loop
over points for the two-sided Hampel test (np.median of each side's
window, located with np.searchsorted), a loop over samples for the bucket
means, a loop over gaps for interpolation, and a loop over window
positions that slices the grid. The rules, grid, windows, split and
outputs are those of bench/dataset_numpy.py (and of `aml dataset build`
on bench/dataset-spec.json): state filter, range (NaN/Inf and the node's
min/max), Hampel with the same noise floor, epoch-aligned bucket means,
linear interpolation of gaps up to maxInterpMs, each run's common range,
windows of H history and F horizon steps every `stride` whose rows are
complete, split by run, train-only normalisation statistics, x/u/y/
timestamps/mask written little-endian, fsynced and hashed (sha256). Like
the vectorised script it is not a byte-for-byte copy of AML's format;
bench/dataset.sh checks that both scripts produce the same window count
and the same sha256 as each other.

Usage: dataset_numpy_plain.py DATA_DIR SPEC.json OUT_DIR   (prints JSON)
Needs Debian's python3-numpy (/usr/bin/python3). Reading the spec and the
store, the split and the output are bench/dataset_ref.py's, shared by both
reference pipelines.
"""
import sys

import numpy as np

from dataset_ref import Job


def hampel_keep(ts, xs, w, k):
    """Which points the two-sided time-windowed Hampel test keeps."""
    n = len(xs)
    keep = np.ones(n, dtype=bool)
    if n < 3 or w <= 0 or k <= 0:
        return keep
    level = np.median(xs)
    noise = 1.4826 * np.median(np.abs(np.diff(xs))) / np.sqrt(2)
    floor = max(noise, 1e-9 * max(1.0, abs(level)))
    for i in range(n):
        t, x = ts[i], xs[i]
        lo = np.searchsorted(ts, t - w, side="left")
        le = np.searchsorted(ts, t, side="left")
        rs = np.searchsorted(ts, t, side="right")
        hi = np.searchsorted(ts, t + w, side="right")
        disagree = 0
        for side in (xs[lo:le], xs[rs:hi]):
            if len(side) < 2:
                continue  # a side with fewer than 2 points does not vote
            med = np.median(side)
            sigma = max(1.4826 * np.median(np.abs(side - med)), floor)
            if abs(x - med) > k * sigma:
                disagree += 1
        if disagree == 2:
            keep[i] = False
    return keep


def main():
    job = Job(*sys.argv[1:4])
    H, F, stride, beat_us, ids, ctrl, tgt = job.H, job.F, job.stride, job.beat_us, job.ids, job.ctrl, job.tgt
    grids = []
    for run_id, k0, nb, rows_of in job.runs():
        g = np.full((nb, len(ids)), np.nan)
        for j, nid in enumerate(ids):
            mn, mx, rows = rows_of(nid)
            # state and range rules
            ts_l, xs_l = [], []
            for ts, x, state in rows:
                if state is not None or not np.isfinite(x):
                    continue
                if mn is not None and x < mn:
                    continue
                if mx is not None and x > mx:
                    continue
                ts_l.append(ts)
                xs_l.append(x)
            ts_a, xs_a = np.array(ts_l, dtype=np.int64), np.array(xs_l, dtype=np.float64)
            keep = hampel_keep(ts_a, xs_a, job.hw, job.hk)
            ts_a, xs_a = ts_a[keep], xs_a[keep]
            # bucket means on the epoch grid
            tot = np.zeros(nb)
            cnt = np.zeros(nb, dtype=np.int64)
            for ts, x in zip(ts_a, xs_a):
                b = ts // beat_us - k0
                if 0 <= b < nb:
                    tot[b] += x
                    cnt[b] += 1
            for b in range(nb):
                if cnt[b] > 0:
                    g[b, j] = tot[b] / cnt[b]
            # linear interpolation of gaps up to max_gap buckets
            idx = np.flatnonzero(cnt > 0)
            for a, c in zip(idx[:-1], idx[1:]):
                gap = c - a - 1
                if 0 < gap <= job.max_gap:
                    slope = (g[c, j] - g[a, j]) / (c - a)
                    for b in range(a + 1, c):
                        g[b, j] = slope * (b - a) + g[a, j]
        # the run's common range: every node has a value at both ends
        lo, hi = 0, nb
        for j in range(len(ids)):
            fin = np.flatnonzero(np.isfinite(g[:, j]))
            if len(fin) == 0:
                lo, hi = 0, 0
                break
            lo, hi = max(lo, fin[0]), min(hi, fin[-1] + 1)
        if hi - lo >= H + F + 2:
            grids.append((run_id, (k0 + lo) * beat_us, g[lo:hi].astype(np.float32)))
    split = job.split(grids)
    xs, us, ys, tss, masks = [], [], [], [], []
    ntrain = 0
    for part in ("train", "val", "test"):
        for run_id, start_us, g in grids:
            if split[run_id] != part:
                continue
            for t in range(H, len(g) - F + 1, stride):
                hist, fut = g[t - H:t], g[t:t + F]
                if not np.isfinite(hist).all() or not np.isfinite(fut[:, ctrl + tgt]).all():
                    continue
                if part == "train":
                    ntrain += 1
                xs.append(hist)
                us.append(fut[:, ctrl])
                ys.append(fut[:, tgt])
                tss.append((start_us + (t - H + np.arange(H + F)) * beat_us) / 1000.0)
                masks.append(np.ones(H + F, dtype=np.float32))
    arrays = {"x": np.array(xs), "u": np.array(us), "y": np.array(ys),
              "timestamps": np.array(tss), "mask": np.array(masks)}
    job.write(arrays, ntrain)


if __name__ == "__main__":
    main()
