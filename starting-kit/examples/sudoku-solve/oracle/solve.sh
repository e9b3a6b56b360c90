#!/bin/bash
# Reference solution: backtracking that always fills the cell with the fewest candidates.
set -euo pipefail
cd "${BENCHFLOW_WORKSPACE:-/root}"
python3 - <<'PY'
rows = [line.strip() for line in open("puzzle.txt") if line.strip()]
grid = [0 if ch == "." else int(ch) for ch in "".join(rows)]

def candidates(i):
    r, c = divmod(i, 9)
    br, bc = r // 3 * 3, c // 3 * 3
    used = {grid[r * 9 + k] for k in range(9)} | {grid[k * 9 + c] for k in range(9)}
    used |= {grid[(br + dr) * 9 + bc + dc] for dr in range(3) for dc in range(3)}
    return [v for v in range(1, 10) if v not in used]

def solve():
    blanks = [i for i in range(81) if grid[i] == 0]
    if not blanks:
        return True
    cell = min(blanks, key=lambda i: len(candidates(i)))
    for value in candidates(cell):
        grid[cell] = value
        if solve():
            return True
    grid[cell] = 0
    return False

assert solve(), "no solution"
with open("solution.txt", "w") as out:
    out.write("\n".join("".join(map(str, grid[r * 9:r * 9 + 9])) for r in range(9)) + "\n")
PY
cat solution.txt
