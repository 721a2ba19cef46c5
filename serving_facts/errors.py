"""The base of every error the shared facts raise: a value that no fact matches (an unknown instance type, a
Triton release, no driver or build for a GPU). Also a ValueError, as callers have always known these errors."""


class ServingFactError(ValueError):
    """A value the facts do not know or cannot match; the message names it and what is allowed."""
