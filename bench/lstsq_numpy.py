"""numpy.linalg.lstsq on the 200 000 x 41 least-squares problem of
BenchmarkLstsq (internal/ident/lsq) / BenchmarkARXFit (internal/ident/linear).

The problem has the same structure as the Go benchmark: a single-output ARX
regression with 3 inputs, na = nb = 10, nk = 1 (40 lagged regressors plus an
intercept), z-scored, on 200 000 rows from a simulated stable system. The
random numbers differ from Go's (a different generator); the timing of a
dense least-squares solve depends only on the shape.

Prints one line: "numpy_lstsq_ms <median> <min> <max> <reps> <blas libraries>".
"""
import sys
import time

import numpy as np

ROWS, NU, NA, NB, NK = 200_000, 3, 10, 10, 1


def problem():
    rng = np.random.default_rng(1)
    lag = max(NA, NK + NB - 1)
    T = ROWS + lag
    u = rng.standard_normal((T, NU))
    e = 0.3 * rng.standard_normal(T)
    y = np.zeros(T)
    for k in range(T):
        v = e[k]
        if k >= 1:
            v += 0.7 * y[k - 1] + u[k - 1, 0] - 0.5 * u[k - 1, 1]
        if k >= 2:
            v += -0.1 * y[k - 2] + 0.2 * u[k - 2, 2]
        y[k] = v
    y = (y - y.mean()) / y.std()
    u = (u - u.mean(axis=0)) / u.std(axis=0)
    cols = [y[lag - i:T - i] for i in range(1, NA + 1)]
    for a in range(NU):
        cols += [u[lag - j:T - j, a] for j in range(NK, NK + NB)]
    cols.append(np.ones(ROWS))
    phi = np.ascontiguousarray(np.column_stack(cols))
    return phi, y[lag:].reshape(-1, 1).copy()


def blas_library():
    try:
        with open("/proc/self/maps") as f:
            libs = {l.split()[-1] for l in f if "blas" in l or "lapack" in l}
        names = sorted({"/".join(p.rsplit("/", 2)[-2:]) for p in libs})
        return ",".join(names) or "unknown"
    except OSError:
        return "unknown"


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    phi, yt = problem()
    assert phi.shape == (ROWS, 41)
    np.linalg.lstsq(phi, yt, rcond=None)  # warm-up (threads, pages)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        x, _, rank, _ = np.linalg.lstsq(phi, yt, rcond=None)
        times.append(time.perf_counter() - t0)
        assert rank == 41
    times.sort()
    med = times[len(times) // 2]
    print("numpy_lstsq_ms %.1f %.1f %.1f %d %s" % (med * 1e3, times[0] * 1e3, times[-1] * 1e3, reps, blas_library()))


if __name__ == "__main__":
    main()
