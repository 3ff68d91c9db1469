"""An independent model of the standings rules (sql/README.md "Standings") and of
the capped weights, for the standings tests. Written from the documented rules,
not from the SQL or the C: windows are recomputed from scratch with plain lists,
and weights by literally iterating "cap, redistribute" with Fractions.
"""
from fractions import Fraction


class Task:
    __slots__ = ("sub", "agent", "challenge", "first_id", "score", "result", "eval_seq",
                 "result_id", "submitted_at")

    def __init__(self, sub, agent, challenge, first_id, submitted_at):
        self.sub, self.agent, self.challenge = sub, agent, challenge
        self.first_id, self.submitted_at = first_id, submitted_at
        self.score = self.result = self.eval_seq = self.result_id = None


def tasks_from_results(rows):
    """rows: (result_id, submission_id, eval_seq, score, result, agent_id, challenge_id,
    submitted_at) in any order. Returns {submission_id: Task} with the latest result."""
    tasks = {}
    for rid, sub, seq, score, res, agent, ch, sat in sorted(rows, key=lambda r: r[0]):
        t = tasks.get(sub)
        if t is None:
            if seq != 1:
                continue
            t = tasks[sub] = Task(sub, agent, ch, rid, sat)
        if t.eval_seq is None or seq > t.eval_seq:
            t.score, t.result, t.eval_seq, t.result_id = score, res, seq, rid
    return tasks


def window(tasks_in_order, n):
    """Aggregates of one ordered task list: (tasks, w_count, w_sum, wins, draws, losses,
    w_best, w_best_pos) with positions 1-based."""
    total = len(tasks_in_order)
    win = tasks_in_order[-n:] if n else []
    first_pos = total - len(win) + 1
    best = best_pos = None
    for k, t in enumerate(win):
        if best is None or t.score >= best:   # the latest position of the best
            best, best_pos = t.score, first_pos + k
    return (total, len(win), sum(t.score for t in win),
            sum(t.result == "win" for t in win), sum(t.result == "draw" for t in win),
            sum(t.result == "loss" for t in win), best, best_pos)


def standings(tasks, n):
    """{agent: window tuple}, {(agent, challenge): window tuple + (best_score, best_sub)}."""
    by_agent, by_pair = {}, {}
    for t in sorted(tasks.values(), key=lambda t: t.first_id):
        by_agent.setdefault(t.agent, []).append(t)
        by_pair.setdefault((t.agent, t.challenge), []).append(t)
    agents = {a: window(ts, n) for a, ts in by_agent.items()}
    pairs = {}
    for key, ts in by_pair.items():
        best = min(ts, key=lambda t: (-t.score, t.submitted_at, t.first_id))
        pairs[key] = window(ts, n) + (best.score, best.sub)
    return agents, pairs


def capped_weights(scores, cap):
    """Exact weights (list of Fractions) by the iterative rule: normalise; while a weight
    is above the cap, set every such weight to the cap and share the excess among the
    uncapped in proportion to their current weights. Raised cap 1/m when fewer than 1/cap
    agents score; all-zero scores: equal split."""
    n = len(scores)
    if n == 0:
        return [], cap
    m = sum(1 for s in scores if s > 0)
    if m == 0:
        return [Fraction(1, n)] * n, cap
    if m * cap < 1:
        cap = Fraction(1, m)
    total = sum(scores)
    w = [Fraction(s, total) for s in scores]
    capped = [False] * n
    while True:
        over = [i for i in range(n) if not capped[i] and w[i] > cap]
        if not over:
            break
        excess = sum(w[i] - cap for i in over)
        for i in over:
            w[i] = cap
            capped[i] = True
        free = sum(w[i] for i in range(n) if not capped[i])
        if free == 0:
            break
        for i in range(n):
            if not capped[i]:
                w[i] += excess * w[i] / free
    return w, cap


def largest_remainder(weights, scale):
    """Units of 1/scale: floors, then one more unit each to the largest remainders (ties to
    the earlier index) until they sum to scale."""
    floors = [int(x * scale) for x in weights]   # x >= 0: int() is floor
    rems = [x * scale - f for x, f in zip(weights, floors)]
    left = scale - sum(floors)
    order = sorted(range(len(weights)), key=lambda i: (-rems[i], i))
    for i in order[:left]:
        floors[i] += 1
    return floors
