"""Set-up and output shared by the two numpy reference pipelines of
bench/dataset.sh (dataset_numpy.py, vectorised, and dataset_numpy_plain.py,
the straightforward one): reading the spec and the SQLite store's runs, the
run split, and writing x/u/y/timestamps/mask little-endian, fsynced and
hashed (sha256) with the train-only normalisation statistics. Only the
pipeline between (cleaning, alignment, windows) differs between them.
"""
import hashlib
import json
import os
import sqlite3
import time

import numpy as np


class Job:
    """One build: DATA_DIR SPEC.json OUT_DIR, as the scripts take them."""

    def __init__(self, data, spec_path, out_dir):
        self.t0 = time.time()
        self.out_dir = out_dir
        spec = self.spec = json.load(open(spec_path))
        self.db = sqlite3.connect(os.path.join(data, "aml.db"))
        self.beat_us = spec["beatMs"] * 1000
        self.H, self.F, self.stride = spec["historySteps"], spec["horizonSteps"], spec.get("stride", 1)
        cl = spec.get("cleaning", {})
        self.hw = cl.get("hampel", {}).get("windowMs", 5 * spec["beatMs"]) * 1000
        self.hk = cl.get("hampel", {}).get("threshold", 3)
        self.max_gap = cl.get("maxInterpMs", 3 * spec["beatMs"]) * 1000 // self.beat_us
        nodes = spec["nodes"]
        order = [n for role in ("control", "disturbance", "feature", "target") for n in nodes if n["role"] == role]
        self.ids = [n["nodeId"] for n in order]
        self.ctrl = [j for j, n in enumerate(order) if n["role"] == "control"]
        self.tgt = [j for j, n in enumerate(order) if n["role"] == "target"]
        self.info = {r[0]: r[1:] for r in self.db.execute("SELECT id, pk, min, max FROM nodes")}
        self.samples = 0

    def runs(self):
        """Each ended run of the spec's recipe, oldest first, as
        (run id, first grid bucket k0, bucket count nb, rows) where
        rows(node id) is (pk... min, max) and its samples (ts µs, value,
        state) in time order."""
        runs = self.db.execute("SELECT id, started_ms, ended_ms FROM runs WHERE recipe_id=? AND status='ended' ORDER BY started_ms",
                               (self.spec["recipeId"],)).fetchall()
        for run_id, start_ms, end_ms in runs:
            ctxs = [r[0] for r in self.db.execute("SELECT pk FROM sample_ctx WHERE run=?", (run_id,))]
            q = "SELECT ts, value, state FROM samples WHERE node=? AND ts>=? AND ts<=? AND ctx IN (%s) ORDER BY ts" % ",".join("?" * len(ctxs))
            k0 = (start_ms * 1000) // self.beat_us
            nb = (end_ms * 1000 + 999) // self.beat_us - k0 + 1

            def rows(nid, q=q, ctxs=ctxs, start_ms=start_ms, end_ms=end_ms):
                pk, mn, mx = self.info[nid]
                rs = self.db.execute(q, (pk, start_ms * 1000, end_ms * 1000 + 999, *ctxs)).fetchall()
                self.samples += len(rs)
                return mn, mx, rs
            yield run_id, k0, nb, rows

    def split(self, grids):
        """run id → train/val/test: a seeded permutation of the kept runs."""
        sp = self.spec.get("split", {})
        rng = np.random.default_rng(sp.get("seed", 1))
        perm = rng.permutation(len(grids))
        nval = round(len(grids) * sp.get("valRatio", 0))
        ntest = round(len(grids) * sp.get("testRatio", 0))
        out = {}
        for i, p in enumerate(perm):
            out[grids[p][0]] = "val" if i < nval else ("test" if i < nval + ntest else "train")
        return out

    def write(self, arrays, ntrain):
        """Writes the arrays and stats.json, prints the JSON summary."""
        stats = {k: (np.nanmean(arrays[k][:ntrain].reshape(-1, arrays[k].shape[-1]), axis=0).tolist(),
                     np.nanstd(arrays[k][:ntrain].reshape(-1, arrays[k].shape[-1]), axis=0).tolist()) for k in ("x", "u", "y")}
        os.makedirs(self.out_dir, exist_ok=True)
        h = hashlib.sha256()
        total = 0
        for k, a in arrays.items():
            b = a.astype("<f8" if k == "timestamps" else "<f4").tobytes()
            total += len(b)
            with open(os.path.join(self.out_dir, k + ".bin"), "wb") as f:
                f.write(b)
                f.flush()
                os.fsync(f.fileno())
            h.update(b)
        json.dump({"norm": stats}, open(os.path.join(self.out_dir, "stats.json"), "w"))
        print(json.dumps({"seconds": time.time() - self.t0, "samples": self.samples, "windows": len(arrays["x"]),
                          "arrayBytes": total, "sha256": h.hexdigest()}))
