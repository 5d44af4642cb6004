// The user's own header: a typedef and a namespaced alias that kernel names use
// (tests/source/test_kernel_names.py).
#pragma once

typedef float real_t;

namespace ga {
using acc_t = double;
}
