# spectralnorm: CLBG spectral-norm, n = 300, 10 power iterations (see spectralnorm.rmt).
import json


def a(i, j):
    return 1.0 / ((i + j) * (i + j + 1) / 2 + i + 1)


def times(v):
    out = []
    for i in range(300):
        s = 0.0
        for j in range(300):
            s = s + a(i, j) * v[j]
        out.append(s)
    return out


def times_transposed(v):
    out = []
    for i in range(300):
        s = 0.0
        for j in range(300):
            s = s + a(j, i) * v[j]
        out.append(s)
    return out


def times_ata(v):
    return times_transposed(times(v))


def main():
    u = [1.0 for i in range(300)]
    v = u
    for k in range(10):
        v = times_ata(u)
        u = times_ata(v)
    vbv = 0.0
    vv = 0.0
    for i in range(300):
        vbv = vbv + u[i] * v[i]
        vv = vv + v[i] * v[i]
    q = vbv / vv
    x = 1.0
    for k in range(40):
        x = (x + q / x) / 2.0
    return {"norm": int(x * 1000000000.0), "vbv": int(vbv * 1000.0), "vv": int(vv * 1000.0)}


print(json.dumps(main()))
