"""Speech shaping cost: ``make_speakable`` on answers of the kinds callers hear (opening
hours, prices, a phone number, plain prose); it prints the best per-answer time of 20 rounds.

Run from the repository root::

    .venv/bin/python -m bench.speech
"""

from __future__ import annotations

import argparse
import time

from app.answering.speech import make_speakable

ROUNDS = 20
RUNS = 300
ANSWERS = (
    "Our office is open Monday through Thursday from 7:30 am to 5:00 pm and on Friday from 8:00 am"
    " to 2:00 pm.",
    "Teeth whitening costs $350 and takes about an hour. Please call 555-123-4567 to book.",
    "Yes, we accept most insurance plans, including Delta Dental and Cigna. Payment is due at the"
    " time of service.",
    "Hours: Mon–Fri 08.30-17.30, Sat 9am–1pm; closed Sun & bank holidays. Call 01632 960318.",
)


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    for answer in ANSWERS:
        make_speakable(answer)  # compiled patterns and caches warm before timing
    best = float("inf")
    for _ in range(ROUNDS):  # the best of several rounds ignores a busy machine's hiccups
        start = time.perf_counter()
        for _ in range(RUNS):
            for answer in ANSWERS:
                make_speakable(answer)
        best = min(best, (time.perf_counter() - start) / (RUNS * len(ANSWERS)))
    print(f"speech shaping, {len(ANSWERS)} answers: best {best * 1e6:.1f} us per answer ({ROUNDS} rounds)")


if __name__ == "__main__":
    main()
