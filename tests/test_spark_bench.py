"""The Spark bench's schedule and per-pair ratios (no Spark: pure functions of bench/spark_bench.py)."""

from bench.spark_bench import pair_ratios, schedule


def test_every_spark_run_sits_between_two_cep_run_slots():
    order = schedule(["local[1]", "local[2]", "lc"], ["2"], rounds=2, roots=2, repeat=3)
    sparks = [s for s in order if s[0] == "spark"]
    assert len(sparks) == 3 * 2 * 2
    assert order[0][0] == "cli" and order[-1][0] == "cli"
    for i, step in enumerate(order):
        if step[0] == "spark":
            assert order[i - 1][0] == "cli" and order[i + 1][0] == "cli"
    # each round turns the order of masters and checkouts, and every (master, checkout) runs once per round
    first = [(s[1], s[3]) for s in sparks[:6]]
    second = [(s[1], s[3]) for s in sparks[6:]]
    assert sorted(first) == sorted(second) and first != second
    assert first[0] == ("local[1]", 0) and second[0] == ("local[2]", 1)


def test_repeat_spreads_over_the_slots():
    order = schedule(["m"], ["2"], rounds=1, roots=1, repeat=5)  # 2 slots: 3 runs each
    assert order == [("cli", 0)] * 3 + [("spark", "m", "2", 0, 0)] + [("cli", 1)] * 3
    assert schedule(["m"], ["2"], 1, 1, 1) == [("cli", 0), ("spark", "m", "2", 0, 0), ("cli", 1)]


def test_a_spark_run_is_paired_with_its_neighbours_of_its_own_checkout():
    def cli(slot, root, cpu):
        return {"path": "cep run file->file", "events": 1000, "cpu_s_exact": cpu, "events_per_cpu_s": round(1000 / cpu),
                "slot": slot, "root": root}

    results = [cli(0, 0, 1.0), cli(0, 1, 9.0),
               {"path": "spark files->files", "cores": "m", "partitions": 2, "slot": 0, "root": 0, "round": 0,
                "steady_events_per_cpu_s": 300},
               cli(1, 0, 3.0), cli(1, 1, 9.0), cli(2, 0, 50.0)]
    [q] = pair_ratios(results)
    # cep run's figure is the events over the mean CPU of the two neighbours (2 s): 500 events per CPU s
    assert q["cep_run"] == 500 and q["ratio"] == 60.0 and q["cep_run_each"] == [1000, 333]
