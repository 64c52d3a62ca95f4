# strings: build, split, join, replace and count 40000 short lines (see strings.rmt).
import json


def main():
    pieces = 0
    matches = 0
    chars = 0
    checksum = 0
    for i in range(40000):
        line = ""
        for j in range(8):
            line = line + f"k{j}=v{(i * 7 + j * 13) % 101};"
        parts = line.split(";")
        joined = ", ".join(parts)
        pretty = joined.replace("=", ": ")
        pieces = pieces + len(parts)
        chars = chars + len(pretty)
        for p in parts:
            if "=v1" in p:
                matches = matches + 1
        checksum = (checksum * 31 + len(pretty)) % 1000000007
    return {"pieces": pieces, "matches": matches, "chars": chars, "checksum": checksum}


print(json.dumps(main()))
