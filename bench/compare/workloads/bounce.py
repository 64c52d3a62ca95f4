# bounce: Are We Fast Yet's Bounce, 100 rounds of 100 balls x 50 steps, a fresh dict per ball per
# step (see bounce.rmt).
import json


def next_seed(seed):
    return (seed * 1309 + 13849) % 65536


def bounce(b):
    x = b["x"] + b["xv"]
    y = b["y"] + b["yv"]
    xv = b["xv"]
    yv = b["yv"]
    hit = False
    if x > 500:
        x = 500
        xv = 0 - abs(xv)
        hit = True
    if x < 0:
        x = 0
        xv = abs(xv)
        hit = True
    if y > 500:
        y = 500
        yv = 0 - abs(yv)
        hit = True
    if y < 0:
        y = 0
        yv = abs(yv)
        hit = True
    return {"x": x, "y": y, "xv": xv, "yv": yv, "hit": hit}


def main():
    seed = 74755
    bounces = 0
    checksum = 0
    for round in range(100):
        balls = []
        for i in range(100):
            seed = next_seed(seed)
            x = seed % 500
            seed = next_seed(seed)
            y = seed % 500
            seed = next_seed(seed)
            xv = seed % 300 - 150
            seed = next_seed(seed)
            yv = seed % 300 - 150
            b = {"x": x, "y": y, "xv": xv, "yv": yv, "hit": False}
            balls.append(b)
        for step in range(50):
            out = []
            for b in balls:
                nb = bounce(b)
                if nb["hit"]:
                    bounces = bounces + 1
                out.append(nb)
            balls = out
        for b in balls:
            checksum = (checksum * 31 + b["x"] * 501 + b["y"]) % 1000000007
    return {"bounces": bounces, "checksum": checksum}


print(json.dumps(main()))
