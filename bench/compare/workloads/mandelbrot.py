# mandelbrot: escape iterations over a 500 x 500 grid, at most 100 per point (see mandelbrot.rmt).
import json


def main():
    iterations = 0
    inside = 0
    checksum = 0
    for py in range(500):
        ci = py * 0.005 - 1.25
        for px in range(500):
            cr = px * 0.006 - 2.0
            x = 0.0
            y = 0.0
            n = 0
            for k in range(100):
                x2 = x * x
                y2 = y * y
                if x2 + y2 > 4.0:
                    break
                y = 2.0 * x * y + ci
                x = x2 - y2 + cr
                n = n + 1
            iterations = iterations + n
            if n == 100:
                inside = inside + 1
            checksum = (checksum * 31 + n) % 1000000007
    return {"iterations": iterations, "inside": inside, "checksum": checksum}


print(json.dumps(main()))
