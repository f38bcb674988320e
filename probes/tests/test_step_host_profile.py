from probes import step_host_profile


def test_the_step_is_profiled_and_its_costliest_functions_named(capsys):
    assert step_host_profile.main(["--size", "small", "--top", "5"]) == 0
    out = capsys.readouterr().out
    assert "course step, L2 D64 H2 V1001 B1 S64" in out and "host" in out
    assert out.count("== the functions with the most") == 2
    assert "training_step" in out or "gpt_loss" in out  # the step's own frames appear in the totals
