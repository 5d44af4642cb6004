"""nvcc, ptxas and the disassemblers: find them, compile with line info, read resources and
SASS with source lines, and cache the results by content."""
