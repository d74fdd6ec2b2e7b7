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
Needs Debian's python3-numpy (/usr/bin/python3).
"""
import hashlib
import json
import os
import sqlite3
import sys
import time

import numpy as np


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
        g = np.full((nb, len(ids)), np.nan)
        for j, nid in enumerate(ids):
            pk, mn, mx = info[nid]
            rows = db.execute(q, (pk, start_ms * 1000, end_ms * 1000 + 999, *ctxs)).fetchall()
            samples += len(rows)
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
            keep = hampel_keep(ts_a, xs_a, hw, hk)
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
                if 0 < gap <= max_gap:
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
