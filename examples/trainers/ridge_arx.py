#!/usr/bin/env python3
"""Ridge ARX trainer for AML — an external trainer using only the Python
standard library (no numpy).

Run by the platform as `--trainer exec:examples/trainers/ridge_arx.py` from the
local CLI, or — over the API or MCP — registered by an admin
(`aml trainer register ridge --exec /abs/path/ridge_arx.py`) and named `ext:ridge`
(protocol: docs/external-trainer.md). It

  * reads $AML_JOB_DIR/job.json: jobId, datasetPath (absolute dataset
    directory), params (object), seed, artifactsDir (absolute);
  * loads the dataset's manifest.json and arrays/x.f32, u.f32, y.f32
    (little-endian float32, C order; format in docs/dataset-format.md);
  * takes the train windows (manifest.split.train.offset/count), at most
    params.maxRows of them (a seeded random subset, default 20000), and
    normalises them with manifest.norm: x per column (all nAll columns), u
    per control column, y per target column;
  * builds one feature row per window
        [ x_norm[H-L:H] flattened (C order), u_norm flattened (F·nCtrl), 1.0 ]
    where L = params.lags (default H: the whole history);
  * fits one ridge regression per output (F·nTgt outputs, normalised y) by
    solving (XᵀX + λI) w = Xᵀy with a hand-written Cholesky factorisation
    (λ = params.lambda, default 1e-3, applied to every feature, bias
    included; if the factorisation fails λ is raised tenfold, at most 8
    times);
  * writes artifactsDir/model.json in the aml.linear-window/1 format (weights
    of unused history steps are 0) and prints `##AML {"type":"done"}`.

Static datasets (kind "static": x [N, nIn], y [N, nTgt], no u) are fitted
the same way with history 1, horizon 1 and no u features (uCols 0).

Params (all optional):
  lambda         ridge penalty, ≥ 0 (default 1e-3)
  lags           history steps used, 1..H (default H)
  maxRows        most train windows used (default 20000)
  emitMalformed  true: print one deliberately malformed line "##AML not-json"
                 early — a hook to test the platform's protocol handling
                 only; never set it for real training

Progress is reported with "progress" and "stage" events. The "metrics"
event carries the trainer's own train-fit (and validation) RMSE, labelled
"source": "trainer-reported": the platform computes every metric itself and
records these only as trainer-reported.

Exit status: 0 on success, 2 for a bad job.json / dataset / params, 1 for
any other failure (an "error" event tells why).
"""

import array
import json
import math
import operator
import os
import random
import sys
import time

FORMAT = "aml.linear-window/1"

try:
    _sumprod = math.sumprod  # Python ≥ 3.12

    def dot(a, b):
        return _sumprod(a, b)
except AttributeError:  # pragma: no cover - depends on the Python version
    _mul = operator.mul

    def dot(a, b):
        return sum(map(_mul, a, b))


class JobError(Exception):
    """A problem with job.json, the dataset or the params (exit 2)."""


def emit(obj):
    sys.stdout.write("##AML " + json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n")
    sys.stdout.flush()


class Progress:
    """Throttled progress events (at most every 0.25 s unless forced)."""

    def __init__(self):
        self.last_t = 0.0
        self.last_p = -1.0

    def __call__(self, p, force=False):
        p = min(1.0, max(0.0, p))
        now = time.monotonic()
        if force or (now - self.last_t >= 0.25 and p > self.last_p):
            emit({"type": "progress", "progress": round(p, 4)})
            self.last_t, self.last_p = now, p


progress = Progress()


def stage(name, message=None):
    ev = {"type": "stage", "stage": name}
    if message:
        ev["message"] = message
    emit(ev)


def log(msg):
    sys.stderr.write("ridge_arx: " + msg + "\n")
    sys.stderr.flush()


# ---------------------------------------------------------------- inputs


def read_json(path, what):
    try:
        with open(path, "r", encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise JobError("cannot read %s %s: %s" % (what, path, e))
    except ValueError as e:
        raise JobError("%s %s is not valid JSON: %s" % (what, path, e))


def param(params, name, default, kind, check, hint):
    v = params.get(name, default)
    if v is None:
        v = default
    if kind is float and isinstance(v, int) and not isinstance(v, bool):
        v = float(v)
    if not isinstance(v, kind) or isinstance(v, bool) and kind is not bool or not check(v):
        raise JobError("params.%s: %s, got %r" % (name, hint, v))
    return v


class F32Rows:
    """Rows of a little-endian float32 array file, read on demand."""

    def __init__(self, path, rows, row_len):
        self.path, self.rows, self.row_len = path, rows, row_len
        try:
            size = os.path.getsize(path)
        except OSError as e:
            raise JobError("cannot read %s: %s" % (path, e))
        if size != rows * row_len * 4:
            raise JobError("%s has %d bytes, the manifest implies %d" % (path, size, rows * row_len * 4))
        self.f = open(path, "rb")

    def read(self, indices):
        """Returns one array('f') per index (indices sorted ascending)."""
        out = []
        swap = sys.byteorder != "little"
        for i in indices:
            self.f.seek(i * self.row_len * 4)
            a = array.array("f")
            a.fromfile(self.f, self.row_len)
            if swap:
                a.byteswap()
            out.append(a)
        return out

    def close(self):
        self.f.close()


def stats(norm, key, n):
    s = norm.get(key) or {}
    mean, std = s.get("mean"), s.get("std")
    if not isinstance(mean, list) or not isinstance(std, list) or len(mean) != n or len(std) != n:
        raise JobError("manifest.norm.%s must hold %d means and stds" % (key, n))
    mean = [float(m) for m in mean]
    # A std that is not > 0 would make normalisation undefined; the
    # dataset floors std, so this only guards hand-made datasets.
    std = [float(v) if (isinstance(v, (int, float)) and math.isfinite(v) and v > 0) else 1.0 for v in std]
    if not all(math.isfinite(m) for m in mean):
        raise JobError("manifest.norm.%s.mean is not finite" % key)
    return mean, std


# ---------------------------------------------------------------- linear algebra


def cholesky(a, n):
    """Lower-triangular L with L·Lᵀ = a (a: list of rows, symmetric; only
    the lower triangle is read). Row i of L holds i+1 values. Raises
    ValueError if a is not positive definite."""
    L = []
    for i in range(n):
        ai = a[i]
        Li = [0.0] * (i + 1)
        for j in range(i + 1):
            Lj = L[j] if j < i else Li
            s = ai[j] - dot(Li[:j], Lj[:j])
            if j == i:
                if not s > 0.0 or not math.isfinite(s):
                    raise ValueError("matrix not positive definite at pivot %d" % i)
                Li[i] = math.sqrt(s)
            else:
                Li[j] = s / Lj[j]
        L.append(Li)
    return L


def cho_solve(L, n, b):
    """Solves L·Lᵀ·w = b."""
    z = [0.0] * n
    for i in range(n):
        Li = L[i]
        z[i] = (b[i] - dot(Li[:i], z[:i])) / Li[i]
    # Columns of L (rows of Lᵀ) below the diagonal.
    w = [0.0] * n
    for i in range(n - 1, -1, -1):
        col = [L[k][i] for k in range(i + 1, n)]
        w[i] = (z[i] - dot(col, w[i + 1:])) / L[i][i]
    return w


# ---------------------------------------------------------------- training


def main():
    job_dir = os.environ.get("AML_JOB_DIR") or os.getcwd()
    job = read_json(os.path.join(job_dir, "job.json"), "job file")
    if not isinstance(job, dict):
        raise JobError("job.json must be an object")
    ds = job.get("datasetPath")
    art = job.get("artifactsDir")
    if not isinstance(ds, str) or not os.path.isabs(ds):
        raise JobError("job.json datasetPath must be an absolute path")
    if not isinstance(art, str) or not os.path.isabs(art):
        raise JobError("job.json artifactsDir must be an absolute path")
    params = job.get("params") or {}
    if not isinstance(params, dict):
        raise JobError("job.json params must be an object")
    seed = job.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        seed = 0

    lam = param(params, "lambda", 1e-3, float, lambda v: math.isfinite(v) and v >= 0, "a finite number ≥ 0")
    max_rows = param(params, "maxRows", 20000, int, lambda v: v >= 1, "an integer ≥ 1")
    if param(params, "emitMalformed", False, bool, lambda v: True, "true or false"):
        # Protocol test hook: the platform must count this line as malformed
        # and carry on.
        sys.stdout.write("##AML not-json\n")
        sys.stdout.flush()

    stage("load", "reading the dataset manifest")
    progress(0.0, force=True)
    man = read_json(os.path.join(ds, "manifest.json"), "dataset manifest")
    kind = man.get("kind", "dynamic")
    shapes = man.get("shapes") or {}
    split = man.get("split") or {}
    norm = man.get("norm") or {}
    targets = man.get("targets") or []
    static = kind == "static"
    try:
        if static:
            N, nX = shapes["x"]
            Ny, nTgt = shapes["y"]
            H, F, nCtrl, uw = 1, 1, 0, 0
        else:
            N, H, nX = shapes["x"]
            Nu, Fu, uw = shapes["u"]
            Ny, F, nTgt = shapes["y"]
            if Nu != N or Fu != F:
                raise JobError("manifest.shapes.u %r does not fit x %r / y %r" % (shapes["u"], shapes["x"], shapes["y"]))
            nCtrl = len(man.get("controls") or [])
            if uw != max(1, nCtrl):
                raise JobError("manifest.shapes.u has %d columns for %d control(s)" % (uw, nCtrl))
    except (KeyError, TypeError, ValueError):
        raise JobError("manifest.shapes must give x, y (and u) shapes, got %r" % (shapes,))
    if Ny != N or min(N, H, F, nX, nTgt) < 1:
        raise JobError("manifest shapes x %r, y %r are inconsistent" % (shapes.get("x"), shapes.get("y")))
    lags = param(params, "lags", H, int, lambda v: 1 <= v <= H, "an integer in 1..%d (history steps)" % H)

    def part(name):
        p = split.get(name) or {}
        off, cnt = p.get("offset", 0), p.get("count", 0)
        if not isinstance(off, int) or not isinstance(cnt, int) or off < 0 or cnt < 0 or off + cnt > N:
            raise JobError("manifest.split.%s offset/count %r/%r outside the %d windows" % (name, off, cnt, N))
        return off, cnt

    tr_off, tr_cnt = part("train")
    va_off, va_cnt = part("val")
    if tr_cnt == 0:
        raise JobError("the dataset has no train windows")
    xm, xs = stats(norm, "x", nX)
    ym, ys = stats(norm, "y", nTgt)
    if nCtrl > 0:
        um, us = stats(norm, "u", nCtrl)
    else:
        um, us = [], []

    rng = random.Random(seed)
    train_idx = list(range(tr_off, tr_off + tr_cnt))
    if len(train_idx) > max_rows:
        train_idx = sorted(rng.sample(train_idx, max_rows))
    val_idx = list(range(va_off, va_off + va_cnt))
    if len(val_idx) > 5000:
        val_idx = sorted(rng.sample(val_idx, 5000))

    # Feature layout of model.json: x part H·nX, u part F·nCtrl, bias. The
    # fit uses the last `lags` history steps only.
    x_len, u_len = H * nX, F * nCtrl
    n_full = x_len + u_len + 1
    first = (H - lags) * nX
    active = list(range(first, x_len)) + list(range(x_len, x_len + u_len)) + [n_full - 1]
    d = len(active)
    n_out = F * nTgt
    stage("features", "%d train windows (of %d), %d features, %d outputs" % (len(train_idx), tr_cnt, d, n_out))
    log("dataset %s: %s, N=%d H=%d F=%d xCols=%d controls=%d targets=%d; lags=%d lambda=%g"
        % (ds, kind, N, H, F, nX, nCtrl, nTgt, lags, lam))

    arrays = os.path.join(ds, "arrays")
    fx = F32Rows(os.path.join(arrays, "x.f32"), N, H * nX)
    fy = F32Rows(os.path.join(arrays, "y.f32"), N, F * nTgt)
    fu = F32Rows(os.path.join(arrays, "u.f32"), N, F * uw) if not static else None

    xmr, xsr = [xm[i % nX] for i in range(x_len)], [xs[i % nX] for i in range(x_len)]
    umr, usr = [um[i % nCtrl] for i in range(u_len)] if nCtrl else [], [us[i % nCtrl] for i in range(u_len)] if nCtrl else []
    ymr, ysr = [ym[i % nTgt] for i in range(n_out)], [ys[i % nTgt] for i in range(n_out)]

    def features(indices, lo, hi):
        """Normalised feature rows (full layout) and targets of windows
        indices[lo:hi]; rows with a non-finite value are skipped."""
        idx = indices[lo:hi]
        xr = fx.read(idx)
        yr = fy.read(idx)
        ur = fu.read(idx) if fu else [None] * len(idx)
        rows, outs = [], []
        for xw, uwin, yw in zip(xr, ur, yr):
            f = [(xw[i] - xmr[i]) / xsr[i] for i in range(first, x_len)]
            if nCtrl:
                # u rows are [F][uw]; uw == nCtrl when there are controls.
                f.extend((uwin[i] - umr[i]) / usr[i] for i in range(u_len))
            f.append(1.0)
            t = [(yw[i] - ymr[i]) / ysr[i] for i in range(n_out)]
            if all(map(math.isfinite, f)) and all(map(math.isfinite, t)):
                rows.append(f)
                outs.append(t)
        return rows, outs

    # Columns of the design matrix and of the targets.
    cols = [array.array("d") for _ in range(d)]
    tcols = [array.array("d") for _ in range(n_out)]
    chunk = 2048
    skipped = 0
    for lo in range(0, len(train_idx), chunk):
        rows, outs = features(train_idx, lo, lo + chunk)
        skipped += min(chunk, len(train_idx) - lo) - len(rows)
        for r in rows:
            for j in range(d):
                cols[j].append(r[j])
        for t in outs:
            for o in range(n_out):
                tcols[o].append(t[o])
        progress(0.05 + 0.25 * min(1.0, (lo + chunk) / len(train_idx)))
    n = len(cols[0])
    if n == 0:
        raise JobError("no usable train window (every one has a non-finite value)")
    if skipped:
        log("skipped %d train window(s) with non-finite values" % skipped)

    stage("gram", "computing XᵀX (%d×%d) over %d rows" % (d, d, n))
    G = [[0.0] * d for _ in range(d)]
    for i in range(d):
        ci = cols[i]
        Gi = G[i]
        for j in range(i + 1):
            v = dot(ci, cols[j])
            Gi[j] = v
            G[j][i] = v
        progress(0.3 + 0.5 * ((i + 1) * (i + 2)) / (d * (d + 1)))
    B = [[dot(cols[i], tcols[o]) for i in range(d)] for o in range(n_out)]
    yy = [dot(tcols[o], tcols[o]) for o in range(n_out)]

    stage("solve", "Cholesky of XᵀX + λI and %d solves" % n_out)
    L = None
    lam_used = lam
    for attempt in range(9):
        A = [[G[i][j] + (lam_used if i == j else 0.0) for j in range(i + 1)] for i in range(d)]
        try:
            L = cholesky(A, d)
            break
        except ValueError as e:
            bumped = max(lam_used * 10.0, 1e-8 * max(1.0, max(G[i][i] for i in range(d))))
            stage("regularise", "%s with lambda=%g; retrying with %g" % (e, lam_used, bumped))
            lam_used = bumped
    if L is None:
        raise RuntimeError("XᵀX + λI is not positive definite even with lambda=%g" % lam_used)
    progress(0.85)
    W = []
    for o in range(n_out):
        W.append(cho_solve(L, d, B[o]))
        progress(0.85 + 0.1 * (o + 1) / n_out)
    for o, w in enumerate(W):
        if not all(map(math.isfinite, w)):
            raise RuntimeError("non-finite weight for output %d" % o)

    # Trainer-reported fit: RSS = yᵀy − 2·wᵀXᵀy + wᵀ(XᵀX)w, per output.
    rss = []
    for o in range(n_out):
        w = W[o]
        Gw = [dot(G[i], w) for i in range(d)]
        rss.append(max(0.0, yy[o] - 2.0 * dot(w, B[o]) + dot(w, Gw)))
    metrics = {"type": "metrics", "source": "trainer-reported",
               "note": "computed by the trainer on its own fit; the platform computes the official metrics",
               "lambda": lam_used, "lags": lags, "trainRows": n,
               "train": {"rmseNormalized": math.sqrt(sum(rss) / (n * n_out)), "rmse": {}}}
    for k in range(nTgt):
        s = sum(rss[f * nTgt + k] for f in range(F)) * ys[k] ** 2
        name = targets[k] if k < len(targets) and isinstance(targets[k], str) else "target%d" % k
        metrics["train"]["rmse"][name] = math.sqrt(s / (n * F))
    if val_idx:
        vr, vo = features(val_idx, 0, len(val_idx))
        if vr:
            se = [0.0] * nTgt
            for f, t in zip(vr, vo):
                for o in range(n_out):
                    e = dot(W[o], f) - t[o]
                    se[o % nTgt] += e * e
            metrics["val"] = {"rows": len(vr), "rmseNormalized": math.sqrt(sum(se) / (len(vr) * n_out)), "rmse": {}}
            for k in range(nTgt):
                name = targets[k] if k < len(targets) and isinstance(targets[k], str) else "target%d" % k
                metrics["val"]["rmse"][name] = math.sqrt(se[k] * ys[k] ** 2 / (len(vr) * F))
    emit(metrics)

    stage("write", "writing model.json")
    weights = []
    for o in range(n_out):
        row = [0.0] * n_full
        for j, idx in enumerate(active):
            row[idx] = W[o][j]
        weights.append(row)
    model = {
        "format": FORMAT,
        "history": H,
        "horizon": F,
        "xCols": nX,
        "uCols": nCtrl,
        "yCols": nTgt,
        "normalized": True,
        "norm": {"x": {"mean": xm, "std": xs}, "u": {"mean": um, "std": us}, "y": {"mean": ym, "std": ys}},
        "weights": weights,
        "trainer": {"name": "ridge_arx", "lambda": lam_used, "lags": lags, "trainRows": n, "seed": seed},
    }
    os.makedirs(art, exist_ok=True)
    tmp = os.path.join(art, "model.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(model, f, allow_nan=False, separators=(",", ":"))
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(art, "model.json"))
    fx.close()
    fy.close()
    if fu:
        fu.close()
    progress(1.0, force=True)
    emit({"type": "done", "artifact": "model.json", "format": FORMAT})
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except JobError as e:
        emit({"type": "error", "message": str(e)})
        log("error: %s" % e)
        sys.exit(2)
    except Exception as e:  # any other failure: report and exit 1
        emit({"type": "error", "message": "%s: %s" % (type(e).__name__, e)})
        import traceback
        traceback.print_exc()
        sys.exit(1)
