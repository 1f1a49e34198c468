"""python -m harness.conformance.field: the run over the installed adapters, its table, the block it replaces."""
from harness.conformance import field


def test_field_refuses_unknown_names_in_one_line(capsys):
    assert field.main(["--libraries", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown ['nosuch']" in err


def test_field_runs_in_parallel_writes_as_it_goes_and_resumes(tmp_path, capsys):
    out = tmp_path / "field.md"
    out.write_text(f"# analysis above\n\n{field.BEGIN}\nold table\n{field.END}\n\nanalysis below\n")
    args = ["--libraries", "rotary-embedding-torch-freqs,torchtune", "--dtypes", "fp32,bf16", "--jobs", "2",
            "--out", str(out)]
    assert field.main(args) == 0
    first, err = out.read_text(), capsys.readouterr().err
    assert "(cached)" not in err and "old table" not in first
    assert first.startswith("# analysis above") and first.rstrip().endswith("analysis below")
    assert "torchtune" in first  # run or, without it, listed with the reason
    kept = sorted(p.name for p in (tmp_path / "field.md.cache").glob("*.json"))
    assert "rotary-embedding-torch-freqs-fp32.json" in kept and "rotary-embedding-torch-freqs-bf16.json" in kept
    rows = [line for line in first.splitlines() if line.startswith("| rotary-embedding-torch-freqs |")]
    assert [r.split(" | ")[2] for r in rows] == ["fp32", "bf16"]  # the table in dtype order, whatever finished first
    assert "| fp32 | 18 | 0 | 0 | 42 |" in rows[0]
    # the usage cases ran too, one verdict each: this style has no module to cast (Library.build), so cast is a
    # skip; its shared-state and decode calls pass
    assert "| cast / shared / decode |" in first
    assert [r.split(" | ")[8] for r in rows] == ["skip / pass / pass"] * 2, rows
    # a second run reads every finished run back (a stopped run resumes), with the same table
    assert field.main(args) == 0
    err = capsys.readouterr().err
    assert err.count("(cached)") == len(kept) and out.read_text() == first
    # a cached run made by other code, data or version is run again
    stale = tmp_path / "field.md.cache" / "rotary-embedding-torch-freqs-fp32.json"
    stale.write_text(stale.read_text().replace('"key": "', '"key": "0'))
    assert field.main(args) == 0
    err = capsys.readouterr().err
    assert "rotary-embedding-torch-freqs fp32:" in err and err.count("(cached)") == len(kept) - 1
    capsys.readouterr()


def test_field_refuses_a_bad_jobs_count(capsys):
    assert field.main(["--jobs", "0"]) == 2
    assert "--jobs '0'" in capsys.readouterr().err
