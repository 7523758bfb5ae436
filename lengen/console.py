"""A researcher's terminal: what a command will cost, said before it starts, and its progress while it runs.

The budgets (lengen.budget) protect a shared server. At a person's own terminal they do not
refuse: the command prints its estimate, one line on stderr, and runs what was asked. One limit stays, the
machine's own: work estimated at more than this machine's memory is refused before it starts, since it
would be killed part way and take other programs with it (the estimates run up to 2× the measured peak,
so what is refused would at least come close). `--budget`, or any
of the budget variables set in the environment (LENGEN_REQUEST_MEMORY_MB, LENGEN_REQUEST_SECONDS,
LENGEN_TRAIN_SECONDS), opts in to the server's limits, and a refusal then says how to lift them.

Progress goes to stderr (tqdm): a training's steps, a sweep's cells and an evaluation's keys as they are
done, a carrier extraction's parts (the core's `progress` hooks, `counted`); an analysis that reports no
steps of its own (a per-head analysis) as the time it has taken against its estimate, marked "estimated",
and closed when the work ends. The estimate
line is written once the work is under way (or done), so input the work itself refuses at once gives
its one error line alone. With `--json` and a stderr that is not a terminal (a script reading the
answer), both stay silent.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TextIO

from lengen.budget import BudgetError, Budgets, Cost, Pricer, budgets_set_in_env, duration, megabytes

BUDGET_FLAG = "--budget"
TICK_SECONDS = 0.5  # how often an estimated bar moves
QUIET_BELOW_SECONDS = 2.0  # work estimated under this shows no bar (it would flash)
SAY_AFTER_SECONDS = 0.2  # the estimate line waits this long: a refusal of bad input comes first, alone


def machine_memory_bytes() -> float:
    """This machine's physical memory; infinite where the system does not say."""
    try:
        return float(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return float("inf")


class TerminalPricer(Pricer):
    """No server budget; refuses only what this machine's memory cannot hold."""

    def check(self, cost: Cost, budgets: Budgets | None = None) -> Cost:
        if self.told is not None:
            self.told(cost)
        memory = machine_memory_bytes()
        if cost.memory_bytes > memory:
            raise BudgetError(f"{cost.what} would need about {megabytes(cost.memory_bytes)} of memory, more than "
                              f"this machine's {megabytes(memory)}: choose {cost.knobs}")
        return cost


def _bar(**options):
    from tqdm import tqdm  # on first use: the app never draws a terminal bar

    return tqdm(**options)


@dataclass
class Console:
    """One command's terminal: its pricer, its estimate line and its progress bars."""

    stderr: TextIO
    limited: bool  # the server's budgets apply (opted in)
    quiet: bool  # --json with a stderr that is not a terminal: no estimate, no progress
    costs: list[Cost] = field(default_factory=list)
    pending: str | None = None  # the estimate line, written once the work is under way
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def for_command(cls, stderr: TextIO, budget_flag: bool, json_output: bool) -> Console:
        terminal = bool(getattr(stderr, "isatty", lambda: False)())
        return cls(stderr, budget_flag or bool(budgets_set_in_env()), json_output and not terminal)

    def pricer(self) -> Pricer:
        """Every cost heard (`costs`, for the estimate line); refused only where the limits apply."""
        if not self.limited:
            return TerminalPricer(Budgets.unlimited(), self.costs.append)
        variables = budgets_set_in_env()
        lift = (f"raise {{env}}, or run without {BUDGET_FLAG}" + (f" and with {', '.join(variables)} unset"
                if variables else "") + " to run it at your own terminal without limits")
        return Pricer(None, self.costs.append, lift)

    def estimate(self) -> float:
        """The estimated seconds of the costs heard so far, which are then forgotten; their line waits
        for the work to be under way (`say`)."""
        costs, self.costs = self.costs, []
        seconds = sum(cost.seconds for cost in costs)
        if costs:
            memory = max(cost.memory_bytes for cost in costs)
            parts = "; ".join(str(cost) for cost in costs)
            total = f" ({duration(seconds)} in all, at most {megabytes(memory)} at once)" if len(costs) > 1 else ""
            limits = "this server's budgets apply" if self.limited else f"no limit at a terminal ({BUDGET_FLAG} applies the server's)"
            self.pending = f"lengen: estimate: {parts}{total}; {limits}"
        return seconds

    def say(self, line: str | None = None) -> None:
        """Write `line`, or the pending estimate (once), unless quiet."""
        with self.lock:
            if line is None:
                line, self.pending = self.pending, None
            if line is not None and not self.quiet:
                self.stderr.write(line + "\n")
                self.stderr.flush()

    def steps(self, what: str, total: int, unit: str):
        """A bar counting `total` `unit`s (a training's steps, a sweep's cells), after the estimate line;
        None when quiet. Made at the first step, so a refusal before it comes alone."""
        self.say()
        if self.quiet:
            return None
        return _bar(total=total, desc=what, unit=f" {unit}", file=self.stderr, leave=True, dynamic_ncols=True)

    @contextmanager
    def counted(self, what: str, seconds: float, unit: str,
                unit_scale: bool = False) -> Iterator[Callable[[int, int], None] | None]:
        """A hook for work that reports its own progress, (done, total) in `unit`s (lengen_core's
        `progress` callbacks): a bar moved by those reports, made at the first, after the estimate line;
        None when quiet. Work estimated under QUIET_BELOW_SECONDS shows its estimate line alone."""
        if self.quiet:
            yield None
            return
        made: list = []

        def heard(done: int, total: int) -> None:
            if not made:
                self.say()
                if seconds < QUIET_BELOW_SECONDS:
                    made.append(None)
                    return
                made.append(_bar(total=total, desc=f"{what} (estimated {duration(seconds)})", unit=f" {unit}",
                                 unit_scale=unit_scale, file=self.stderr, leave=True, dynamic_ncols=True))
            bar = made[0]
            if bar is not None:
                bar.total = total
                bar.update(done - bar.n)

        finished = False
        try:
            yield heard
            finished = True
        finally:
            if finished:
                self.say()  # work that reported nothing: its estimate, said as it ends (a refusal comes alone)
            if made and made[0] is not None:
                made[0].close()

    @contextmanager
    def estimated(self, what: str, seconds: float) -> Iterator[None]:
        """A bar for work that reports no steps: the seconds taken against `seconds` estimated, moved by a
        thread until the work ends (then full); never past 99% while the work is still running."""
        if self.quiet:
            yield
            return
        total = max(1, round(seconds))
        done, made = threading.Event(), []
        start = time.monotonic()

        def tick() -> None:
            if done.wait(SAY_AFTER_SECONDS):
                return
            self.say()
            if seconds < QUIET_BELOW_SECONDS:
                return
            bar = _bar(total=total, desc=f"{what} (estimated {duration(seconds)})", unit=" s", file=self.stderr,
                       leave=True, dynamic_ncols=True, bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}")
            made.append(bar)
            while not done.wait(TICK_SECONDS):
                bar.n = min(time.monotonic() - start, 0.99 * total)
                bar.refresh()

        ticker = threading.Thread(target=tick, daemon=True)
        ticker.start()
        finished = False
        try:
            yield
            finished = True
        finally:
            done.set()
            ticker.join()
            if finished:
                self.say()  # quick work: its estimate, said as it ends
            for bar in made:
                if finished:
                    bar.n = total
                bar.refresh()
                bar.close()
