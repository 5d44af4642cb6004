"""The rule API: what a rule file in ``rules/`` imports (and nothing else but gpuadvise.errors).

See :mod:`gpuadvise.rules.engine` for the types and the registry.
"""

from gpuadvise.rules.engine import *  # noqa: F401,F403
from gpuadvise.rules.engine import __all__ as _engine_all
from gpuadvise.rules.engine import doc_sections, validate_rule  # noqa: F401
from gpuadvise.source.text import (  # noqa: F401  (the parsed source: KernelSource's methods)
    KernelSource,
    blank_comments_and_strings,
    find_kernel_source,
    line_of,
    match_brace,
    split_top,
)
from gpuadvise.source.tree import Expr, parse_expression  # noqa: F401
from gpuadvise.toolchain.sass import (  # noqa: F401  (SASS operand readers)
    halfword_prmt,
    one_lane_fp16,
    same_source_file,
)

__all__ = list(_engine_all)
