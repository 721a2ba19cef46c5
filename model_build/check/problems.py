"""One problem found in a model repository: which model, which field, which rule, what is wrong."""

from __future__ import annotations

from dataclasses import dataclass

# Problems about the repository itself (root config.pbtxt, no models) carry this model name.
REPOSITORY = "(repository)"


@dataclass(frozen=True)
class Problem:
    """A single broken rule.

    `message` reproduces Triton's own wording where Triton has a rule (so a problem can be matched
    against the server log it would cause); `rule` is a short stable id, listed in
    docs/model-build-check.md, for looking the rule up.
    """

    model: str
    field: str
    message: str
    rule: str

    def __str__(self) -> str:
        # Always one line: a message built from user text (a tensor name) must not break the format.
        text = " ".join(self.message.split())
        field = f" {self.field}:" if self.field else ""
        return f"{self.model}:{field} {text} [{self.rule}]"
