"""softmax never returns, asleep: a hang that costs no CPU while it waits out a time limit (a limit is wall-clock
time, so it is stopped as hangs.py's busy loop is, which tests/test_autograder_guarantees.py stops)."""
import time


def softmax(x):
    while True:
        time.sleep(1)
