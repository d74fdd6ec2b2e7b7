#!/usr/bin/env python3
"""Example executable predictor for AML (protocol aml.predict/1, see
docs/external-trainer.md), Python standard library only.

It predicts "last observed target value held over the horizon": for window
n, target k and every future step f,

    yhat[n, f, k] = x[n, H-1, xCols - nTgt + k]

This relies on the dataset column-order convention — controls, then
disturbances, then features, then targets — so the targets are the LAST nTgt
columns of x (docs/dataset-format.md). It therefore only makes sense for
window datasets whose x holds every column (not for static datasets, whose x
holds the inputs only).

The platform runs it with cwd = the model's artifact directory and
AML_PREDICT_DIR set; it reads $AML_PREDICT_DIR/request.json
{"format":"aml.predict/1","n":N,"history":H,"horizon":F,"xCols":nAll,
 "uCols":nCtrl,"yCols":nTgt} and $AML_PREDICT_DIR/x.f32 ([N,H,nAll]
little-endian float32) — u.f32 is not needed here — and writes
$AML_PREDICT_DIR/yhat.f32 ([N,F,nTgt] little-endian float32).

An artifact using it has model.json
    {"format":"aml.exec-predictor/1","command":["python3","predict_exec_example.py"]}
with this file copied next to it.

Exit status: 0 on success, 2 on a bad request.
"""

import array
import json
import os
import sys


def fail(msg):
    sys.stderr.write("predict_exec_example: %s\n" % msg)
    sys.exit(2)


def main():
    pred_dir = os.environ.get("AML_PREDICT_DIR")
    if not pred_dir:
        fail("AML_PREDICT_DIR is not set")
    try:
        with open(os.path.join(pred_dir, "request.json"), encoding="utf-8") as f:
            req = json.load(f)
    except (OSError, ValueError) as e:
        fail("cannot read request.json: %s" % e)
    if req.get("format") != "aml.predict/1":
        fail("unsupported request format %r" % req.get("format"))
    try:
        n, H, F = int(req["n"]), int(req["history"]), int(req["horizon"])
        nAll, nTgt = int(req["xCols"]), int(req["yCols"])
    except (KeyError, TypeError, ValueError) as e:
        fail("bad request.json: %s" % e)
    if min(n, H, F, nAll, nTgt) < 1 or nTgt > nAll:
        fail("bad dimensions n=%d H=%d F=%d xCols=%d yCols=%d" % (n, H, F, nAll, nTgt))

    x = array.array("f")
    path = os.path.join(pred_dir, "x.f32")
    want = n * H * nAll
    if os.path.getsize(path) != want * 4:
        fail("x.f32 has %d bytes, need %d" % (os.path.getsize(path), want * 4))
    with open(path, "rb") as f:
        x.fromfile(f, want)
    if sys.byteorder != "little":
        x.byteswap()

    out = array.array("f")
    first = nAll - nTgt  # first target column
    for w in range(n):
        last = (w * H + H - 1) * nAll  # row H-1 of window w
        held = x[last + first:last + nAll]
        for _ in range(F):
            out.extend(held)
    if sys.byteorder != "little":
        out.byteswap()
    tmp = os.path.join(pred_dir, "yhat.f32.tmp")
    with open(tmp, "wb") as f:
        out.tofile(f)
    os.replace(tmp, os.path.join(pred_dir, "yhat.f32"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
