# An honest softmax that times itself at import, in the forms the documentation shows: timeit with the
# statement as a string and globals=globals(), and PyTorch's benchmark Timer (which takes statements as
# strings only), also over a loop of labelled literal statements as PyTorch's benchmark recipe writes it. The
# literal statements are audited as code; the worker lets exactly them run.
import timeit

import torch
import torch.utils.benchmark

from good_triton import softmax  # the kernel: good_triton's, audited with this file

x = torch.randn(16, 100, device="cuda" if torch.cuda.is_available() else "cpu")
seconds = timeit.timeit("softmax(x)", globals=globals(), number=2)
print(f"timeit: {seconds / 2 * 1e3:.3f} ms")
print(torch.utils.benchmark.Timer(stmt="softmax(x)", globals={"x": x, "softmax": softmax}).timeit(2))
for label, stmt in (("mine", "softmax(x)"), ("torch", "torch.softmax(x, -1)")):
    print(label, torch.utils.benchmark.Timer(stmt=stmt, globals={"x": x, "softmax": softmax, "torch": torch}).timeit(2))
