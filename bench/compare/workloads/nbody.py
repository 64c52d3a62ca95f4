# nbody: 8 bodies, 20000 symplectic Euler steps, a fresh dict per body per step (see nbody.rmt).
import json


def initial():
    bodies = []
    for i in range(8):
        b = {
            "x": float((i * 37) % 11) - 5.0,
            "y": float((i * 53) % 13) - 6.0,
            "z": float((i * 29) % 7) - 3.0,
            "vx": float((i * 17) % 5) * 0.1 - 0.2,
            "vy": float((i * 23) % 7) * 0.1 - 0.3,
            "vz": float((i * 31) % 3) * 0.1 - 0.1,
            "mass": 1.0 + float(i % 3) * 0.5,
        }
        bodies.append(b)
    return bodies


def step(bodies, dt):
    out = []
    for i in range(8):
        b = bodies[i]
        ax = 0.0
        ay = 0.0
        az = 0.0
        for j in range(8):
            if j != i:
                o = bodies[j]
                dx = o["x"] - b["x"]
                dy = o["y"] - b["y"]
                dz = o["z"] - b["z"]
                d2 = dx * dx + dy * dy + dz * dz + 0.01
                mag = o["mass"] / d2
                ax = ax + dx * mag
                ay = ay + dy * mag
                az = az + dz * mag
        vx = b["vx"] + dt * ax
        vy = b["vy"] + dt * ay
        vz = b["vz"] + dt * az
        nb = {
            "x": b["x"] + dt * vx,
            "y": b["y"] + dt * vy,
            "z": b["z"] + dt * vz,
            "vx": vx,
            "vy": vy,
            "vz": vz,
            "mass": b["mass"],
        }
        out.append(nb)
    return out


def main():
    bodies = initial()
    for s in range(20000):
        bodies = step(bodies, 0.001)
    pos = 0.0
    vel = 0.0
    for b in bodies:
        pos = pos + b["x"] + b["y"] + b["z"]
        vel = vel + b["vx"] + b["vy"] + b["vz"]
    first_body = bodies[0]
    return {
        "pos": int(pos * 1000000000.0),
        "vel": int(vel * 1000000000.0),
        "x0": int(first_body["x"] * 1000000000.0),
    }


print(json.dumps(main()))
