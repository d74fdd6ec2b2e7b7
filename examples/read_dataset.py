#!/usr/bin/env python3
"""Read and verify an AML dataset directory with the Python standard library.

Usage:
    read_dataset.py DIR [--expect-sha256 HEX] [--registered-spec JSON|@FILE]

DIR is a dataset directory, <data>/datasets/<id>, as written by
`aml dataset build` (format described in docs/dataset-format.md).

The script
  * loads manifest.json and checks formatVersion;
  * checks every artifact listed in the manifest: its name stays inside DIR,
    the file exists, its size equals the manifest's `bytes` and its sha256
    equals the manifest's `sha256`;
  * for every array artifact, checks dtype, that bytes == prod(shape) *
    itemsize and that the shape equals manifest.shapes[...];
  * reports files in DIR that the manifest does not list;
  * checks spec.json: it must end with one newline, and sha256 of its bytes
    without that newline (the canonical spec) must equal manifest.specHash;
  * recomputes the dataset hash exactly as DatasetHash in
    internal/dataset/files.go does:

        sha256( "aml-dataset/1\\n"
                + "spec " + canonicalSpec + "\\n"
                + for each artifact, in manifest order: name + " " + sha256hex + "\\n"
                + "manifest.json " + sha256hex(manifest.json bytes) + "\\n" )

  * prints a summary: kind, shapes, split counts, the first window's (or
    row's) first x row and the normalisation means.

--expect-sha256 HEX     the registered dataset hash (`sha256` in the output
                        of `aml dataset build --json`); exit 1 if the
                        recomputed hash differs.
--registered-spec TEXT  the registered canonical spec (`spec` in the same
                        output), inline or as @FILE. It is then used as the
                        canonical spec of the hash (as `aml dataset verify`
                        does) and spec.json must equal it (ignoring
                        surrounding white space).

Exit status: 0 when every check passed, 1 when any check failed, 2 on a
usage error (bad arguments, DIR not a directory).
"""

import array
import hashlib
import json
import os
import sys

HASH_PREFIX = b"aml-dataset/1\n"
FORMAT_VERSION = 1
ITEMSIZE = {"<f4": 4, "<f8": 8}
TYPECODE = {"<f4": "f", "<f8": "d"}
# Array artifact name -> key in manifest.shapes.
SHAPE_KEY = {
    "arrays/x.f32": "x",
    "arrays/u.f32": "u",
    "arrays/y.f32": "y",
    "arrays/timestamps.f64": "timestamps",
    "arrays/mask.f32": "mask",
    "arrays/grid.f32": "grid",
    "arrays/grid_timestamps.f64": "gridTimestamps",
}
CHUNK = 1 << 20


class UsageError(Exception):
    pass


def usage_text():
    return ("usage: read_dataset.py DIR [--expect-sha256 HEX] "
            "[--registered-spec JSON|@FILE]")


def parse_args(argv):
    opts = {"dir": None, "expect": None, "spec": None}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            print(__doc__.strip())
            sys.exit(0)
        name, eq, val = a.partition("=")
        if name in ("--expect-sha256", "--registered-spec"):
            if not eq:
                i += 1
                if i >= len(argv):
                    raise UsageError("%s needs a value" % name)
                val = argv[i]
            if name == "--expect-sha256":
                if opts["expect"] is not None:
                    raise UsageError("--expect-sha256 given twice")
                v = val.strip().lower()
                if len(v) != 64 or any(c not in "0123456789abcdef" for c in v):
                    raise UsageError("--expect-sha256 must be 64 hex digits, got %r" % val)
                opts["expect"] = v
            else:
                if opts["spec"] is not None:
                    raise UsageError("--registered-spec given twice")
                if val.startswith("@"):
                    try:
                        with open(val[1:], "rb") as f:
                            opts["spec"] = f.read()
                    except OSError as e:
                        raise UsageError("--registered-spec: %s" % e)
                else:
                    opts["spec"] = val.encode("utf-8")
        elif a.startswith("-") and a != "-":
            raise UsageError("unknown option %s" % a)
        else:
            if opts["dir"] is not None:
                raise UsageError("only one dataset directory may be given")
            opts["dir"] = a
        i += 1
    if opts["dir"] is None:
        raise UsageError("the dataset directory is required")
    if not os.path.isdir(opts["dir"]):
        raise UsageError("%s is not a directory" % opts["dir"])
    return opts


def file_sha256(path):
    h = hashlib.sha256()
    n = 0
    with open(path, "rb") as f:
        while True:
            b = f.read(CHUNK)
            if not b:
                break
            h.update(b)
            n += len(b)
    return h.hexdigest(), n


def safe_name(name):
    """Mirror of safeName in files.go: relative, '/'-separated, no '.'/'..'."""
    if not isinstance(name, str) or name == "" or name.startswith("/") or "\\" in name:
        return False
    return all(p not in ("", ".", "..") for p in name.split("/"))


def prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def is_shape(v):
    return isinstance(v, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in v)


def dataset_hash(canonical_spec, artifacts, manifest_sha):
    h = hashlib.sha256()
    h.update(HASH_PREFIX)
    h.update(b"spec ")
    h.update(canonical_spec)
    h.update(b"\n")
    for a in artifacts:
        h.update(("%s %s\n" % (a["name"], a["sha256"])).encode("utf-8"))
    h.update(("manifest.json %s\n" % manifest_sha).encode("utf-8"))
    return h.hexdigest()


def read_values(path, dtype, count):
    """Read the first `count` little-endian values of an array file."""
    arr = array.array(TYPECODE[dtype])
    if arr.itemsize != ITEMSIZE[dtype]:
        raise RuntimeError("array typecode %r is %d bytes on this platform" % (arr.typecode, arr.itemsize))
    with open(path, "rb") as f:
        arr.frombytes(f.read(count * arr.itemsize))
    if sys.byteorder == "big":
        arr.byteswap()
    return list(arr)


def fmt_num(v):
    return "%.6g" % v


def main(argv):
    try:
        opts = parse_args(argv)
    except UsageError as e:
        print("error: %s\n%s" % (e, usage_text()), file=sys.stderr)
        return 2

    root = opts["dir"]
    problems = []

    def bad(what, msg):
        problems.append("%s: %s" % (what, msg))

    # manifest.json
    mpath = os.path.join(root, "manifest.json")
    try:
        with open(mpath, "rb") as f:
            mbytes = f.read()
    except OSError as e:
        print("FAIL manifest.json: cannot read: %s" % e, file=sys.stderr)
        return 1
    try:
        m = json.loads(mbytes.decode("utf-8"))
        if not isinstance(m, dict):
            raise ValueError("not a JSON object")
    except ValueError as e:
        print("FAIL manifest.json: not valid JSON: %s" % e, file=sys.stderr)
        return 1
    manifest_sha = hashlib.sha256(mbytes).hexdigest()
    if m.get("formatVersion") != FORMAT_VERSION:
        bad("manifest.json", "formatVersion %r, this reader knows %d" % (m.get("formatVersion"), FORMAT_VERSION))
    artifacts = m.get("artifacts")
    if not isinstance(artifacts, list) or not artifacts:
        print("FAIL manifest.json: no artifacts list", file=sys.stderr)
        return 1
    shapes = m.get("shapes") if isinstance(m.get("shapes"), dict) else {}

    # Every artifact: name, size, sha256; arrays: dtype and shape.
    listed = {"manifest.json"}
    total_bytes = len(mbytes)
    hashable = True
    for i, a in enumerate(artifacts):
        if not isinstance(a, dict) or not isinstance(a.get("name"), str) or not isinstance(a.get("sha256"), str):
            bad("manifest.json", "artifact %d is malformed" % i)
            hashable = False
            continue
        name = a["name"]
        if not safe_name(name):
            bad("manifest.json", "artifact name %r escapes the dataset directory" % name)
            continue
        listed.add(name)
        path = os.path.join(root, *name.split("/"))
        try:
            sha, n = file_sha256(path)
        except OSError as e:
            bad(name, "cannot read: %s" % e)
            continue
        total_bytes += n
        if n != a.get("bytes"):
            bad(name, "size %d bytes, manifest says %r" % (n, a.get("bytes")))
        elif sha != a["sha256"]:
            bad(name, "sha256 %s, manifest says %s" % (sha[:12], a["sha256"][:12]))
        dtype = a.get("dtype")
        if dtype is None and "shape" not in a:
            continue  # a JSON blob
        if dtype not in ITEMSIZE:
            bad(name, "unknown dtype %r" % dtype)
            continue
        shape = a.get("shape")
        if not is_shape(shape):
            bad(name, "bad shape %r" % (shape,))
            continue
        want = prod(shape) * ITEMSIZE[dtype]
        if n != want:
            bad(name, "%d bytes, but shape %s of %s needs %d" % (n, shape, dtype, want))
        key = SHAPE_KEY.get(name)
        if key is not None and shapes.get(key) != shape:
            bad(name, "shape %s, manifest.shapes[%r] is %s" % (shape, key, shapes.get(key)))
        ext = {"<f4": ".f32", "<f8": ".f64"}[dtype]
        if not name.endswith(ext):
            bad(name, "dtype %s but the file name does not end in %s" % (dtype, ext))

    # Files the manifest does not list do not belong to the dataset.
    for dirpath, _, files in os.walk(root):
        for fn in files:
            rel = os.path.relpath(os.path.join(dirpath, fn), root).replace(os.sep, "/")
            if rel not in listed:
                bad(rel, "file is not listed in the manifest")

    # spec.json: canonical spec + "\n"; specHash = sha256(canonical spec).
    canonical = None
    try:
        with open(os.path.join(root, "spec.json"), "rb") as f:
            sbytes = f.read()
        if sbytes.endswith(b"\n"):
            canonical = sbytes[:-1]
        else:
            bad("spec.json", "does not end with a newline")
            canonical = sbytes
        if hashlib.sha256(canonical).hexdigest() != m.get("specHash"):
            bad("spec.json", "sha256 of the canonical spec differs from manifest.specHash")
    except OSError as e:
        bad("spec.json", "cannot read: %s" % e)
    if opts["spec"] is not None:
        if canonical is not None and canonical.strip() != opts["spec"].strip():
            bad("spec.json", "differs from the registered spec")
        canonical = opts["spec"]

    computed = None
    if canonical is not None and hashable:
        computed = dataset_hash(canonical, artifacts, manifest_sha)
        if opts["expect"] is not None and computed != opts["expect"]:
            bad("dataset", "hash %s does not match the expected %s" % (computed, opts["expect"]))
    elif opts["expect"] is not None:
        bad("dataset", "the hash cannot be recomputed, so it cannot match --expect-sha256")

    # Split bookkeeping: offsets and counts tile the first array dimension.
    split = m.get("split") if isinstance(m.get("split"), dict) else {}
    counts = {}
    off = 0
    for s in ("train", "val", "test"):
        part = split.get(s) if isinstance(split.get(s), dict) else {}
        c, o = part.get("count"), part.get("offset")
        counts[s] = (c, part.get("runIds") or [])
        if not isinstance(c, int) or o != off:
            bad("manifest.json", "split.%s offset %r / count %r do not follow train|val|test" % (s, o, c))
            off = None
            break
        off += c
    if off is not None:
        for key in ("x", "y", "timestamps"):
            sh = shapes.get(key)
            if is_shape(sh) and sh and sh[0] != off:
                bad("manifest.json", "shapes.%s[0] = %d, the splits hold %d" % (key, sh[0], off))

    # Summary.
    print("dataset   %s" % os.path.basename(os.path.abspath(root)))
    print("kind      %s (%s), format %s, spec %s" % (m.get("kind"), m.get("purpose"), m.get("formatVersion"), m.get("specHash", "")[:12]))
    print("recipe    %s / %s / %s" % (m.get("lineId"), m.get("productId"), m.get("recipeId")))
    if m.get("kind") == "dynamic":
        print("grid      beat %s ms, history %s, horizon %s, stride %s" % (m.get("beatMs"), m.get("historySteps"), m.get("horizonSteps"), m.get("stride")))
    print("columns   %s" % ", ".join(m.get("allNodes") or []))
    print("shapes")
    for key in ("x", "u", "y", "timestamps", "mask", "grid", "gridTimestamps"):
        if key in shapes:
            print("  %-15s %s" % (key, shapes[key]))
    print("split     %s (seed %s)" % (split.get("mode"), split.get("seed")))
    for s in ("train", "val", "test"):
        c, runs = counts.get(s, (None, []))
        print("  %-5s %7s  %s" % (s, c, " ".join(runs)))

    x_art = next((a for a in artifacts if isinstance(a, dict) and a.get("name") == "arrays/x.f32"), None)
    x_shape = x_art.get("shape") if x_art else None
    names = (m.get("allNodes") if m.get("kind") == "dynamic" else m.get("inputs")) or []
    if x_art and is_shape(x_shape) and x_shape and x_shape[0] > 0 and x_art.get("dtype") == "<f4":
        row_len = x_shape[-1] if len(x_shape) > 1 else 1
        try:
            row = read_values(os.path.join(root, "arrays", "x.f32"), "<f4", row_len)
            if len(row) == row_len:
                print("x[0,0,:]" if len(x_shape) == 3 else "x[0,:]")
                for j, v in enumerate(row):
                    label = names[j] if j < len(names) else "col%d" % j
                    print("  %-28s %s" % (label, fmt_num(v)))
            else:
                bad("arrays/x.f32", "too short to hold one row")
        except (OSError, RuntimeError) as e:
            bad("arrays/x.f32", "cannot read the first row: %s" % e)

    norm = m.get("norm") if isinstance(m.get("norm"), dict) else {}
    for key, cols in (("x", names), ("u", m.get("controls") or []), ("y", m.get("targets") or [])):
        st = norm.get(key) if isinstance(norm.get(key), dict) else {}
        means = st.get("mean") or []
        if not means:
            continue
        print("norm.%s.mean" % key)
        for j, v in enumerate(means):
            label = cols[j] if j < len(cols) else "(no control: zero column)" if key == "u" else "col%d" % j
            print("  %-28s %s" % (label, fmt_num(v)))
    lin = m.get("lineage") if isinstance(m.get("lineage"), dict) else {}
    print("lineage   verified=%s" % lin.get("lineageVerified"))
    print("bytes     %d in %d artifact(s) + manifest.json" % (total_bytes, len(artifacts)))
    if computed is not None:
        print("sha256    %s%s" % (computed, "" if opts["expect"] is None else
                                    ("  (matches --expect-sha256)" if computed == opts["expect"] else "  (EXPECTED %s)" % opts["expect"])))

    if problems:
        print("FAIL: %d problem(s)" % len(problems), file=sys.stderr)
        for p in problems:
            print("  " + p, file=sys.stderr)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
