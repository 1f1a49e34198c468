"""python -m harness.conformance.field: the run over the installed adapters, its table, the block it replaces."""
from harness.conformance import field


def test_field_run_writes_its_block_and_keeps_the_rest(tmp_path, capsys):
    out = tmp_path / "field.md"
    out.write_text(f"# analysis above\n\n{field.BEGIN}\nold table\n{field.END}\n\nanalysis below\n")
    rc = field.main(["--libraries", "rotary-embedding-torch-freqs,torchtune", "--dtypes", "fp32", "--out", str(out)])
    text = out.read_text()
    assert rc == 0 and "old table" not in text
    assert text.startswith("# analysis above") and text.rstrip().endswith("analysis below")
    row = next(line for line in text.splitlines() if line.startswith("| rotary-embedding-torch-freqs |"))
    assert "| fp32 | 18 | 0 | 0 | 42 |" in row
    assert "torchtune" in text  # run or, without it, listed with the reason
    capsys.readouterr()


def test_field_refuses_unknown_names_in_one_line(capsys):
    assert field.main(["--libraries", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown ['nosuch']" in err
