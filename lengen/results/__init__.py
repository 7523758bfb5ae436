"""What each command of the command line answers (lengen.cli): one frozen dataclass per command, holding the
core's own typed results, each with its two forms: `to_json()`, the `--json` document (docs/cli.md lists every
field), and `text()`, the short readable summary. The command line writes whichever was asked for; nothing works
out from a result's keys which command made it.

    answer = Evaluation(measurement, "retrieval", 16, Where.of(run))   # lengen_core.measure's one measurement
    answer.to_json()["lengths"][0]["accuracy"]                         # a dictionary only here, for json.dumps
    answer.text()                                                      # the table the command line writes

common (Result, Where, the formatters) · runs (Trained, Runs, Deleted, Swept) · measurements (Evaluation,
DelayEvaluation, TransferResult) · mechanisms (CarrierResult, Heads, Absolute, Denominators).
"""

from lengen.results.common import Result, Where, finite
from lengen.results.measurements import DelayEvaluation, Evaluation, TransferResult, length_row
from lengen.results.mechanisms import Absolute, CarrierResult, Denominators, Heads
from lengen.results.runs import Deleted, Listed, Runs, Swept, Trained

__all__ = ["Absolute", "CarrierResult", "DelayEvaluation", "Deleted", "Denominators", "Evaluation", "Heads", "Listed",
           "Result", "Runs", "Swept", "Trained", "TransferResult", "Where", "finite", "length_row"]
