"""harness/bench/kernel_ab.py, the paired A/B tool of C kernel builds: it builds its variants, times them in turn, prints a
ratio per variant, and leaves the project's own kernel in place."""
import re

import pytest
import torch

from harness.rope import cpu
from harness.bench import kernel_ab

pytestmark = pytest.mark.skipif(cpu.unavailable() is not None, reason=f"no C kernel here: {cpu.unavailable()}")
KEY = "cpu/fwd/interleaved/float16/prefill"


@pytest.mark.slow
def test_two_builds_are_timed_in_turn_and_the_projects_kernel_is_restored(capsys, monkeypatch):
    own = cpu._kernel(torch.float16)
    measured = []
    real = kernel_ab.kernel_bench.measure
    monkeypatch.setattr(kernel_ab.kernel_bench, "measure",
                        lambda key, **kw: measured.append(cpu._kernel(torch.float16)) or real(key, **kw))
    assert kernel_ab.main(["--keys", KEY, "--variant", "base=", "--variant", "lock2=-DLOCK=2", "--rounds", "2",
                           "--budget", "0.05"]) == 0
    line = capsys.readouterr().out.strip()
    assert re.fullmatch(rf"{KEY}\s+base R \d+\.\d{{3}} x1\.000 \| lock2 R \d+\.\d{{3}} x\d+\.\d{{3}}", line), line
    assert len(measured) == 4 and len({id(f) for f in measured}) == 2 and own not in measured  # both builds, in turn
    assert measured[0] is measured[3] and measured[1] is measured[2]  # the order reversed in the second round
    assert cpu._kernel(torch.float16) is own


@pytest.mark.parametrize("argv", [["--keys", KEY, "--variant", "base"], ["--keys", "eager/fwd/half/float32/prefill",
                                                                          "--variant", "base="]])
def test_bad_arguments_are_one_line_before_any_build(argv, capsys):
    with pytest.raises(SystemExit) as e:
        kernel_ab.main(argv)
    assert e.value.code == 2 and "need NAME=FLAGS|DIR variants" in capsys.readouterr().err


def test_a_build_error_names_the_variant(tmp_path):
    with pytest.raises(SystemExit, match=r"variant 'broken' did not build: .*"):
        kernel_ab.build("broken", "-DLOCK=(", tmp_path)
