"""``python -m calibration damon`` and the model's measured hotness (``hotness: {cdf}``).

Records are built here with a known Zipf hotness, as DAMON would write them: the pages
of a working set, ranked by a Zipf popularity, are grouped into regions (geometric in
rank, as DAMON's adaptive regions are small where accesses are dense), laid out in a
shuffled address order; in each aggregation interval a region's ``nr_accesses`` is
the number of sampling intervals (out of aggr/sample) in which its sampled page was
accessed: Binomial with ``1 - exp(-lam)``, ``lam`` the region's mean accesses per
page and sampling interval (Poisson accesses). The sampling (10 us of 2 s) lets DAMON
resolve the whole range of a Zipf 0.99's rates over 6.3 million pages (the hottest page
at 3 accesses per interval, the coldest seen a few times in the record); coarser
sampling saturates the head or misses the tail, which the tenant's comments report.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from calibration.cli import main
from calibration.damon import (
    DamonError,
    find_phases,
    read_records,
    tenant_from_record,
)
from envs.kernel import PAGES_PER_GIB
from envs.model import BUCKET_EDGES, bucket_access_shares, compile_params
from envs.scenario import CdfHotness, ScenarioError, ZipfHotness, load_scenario

PAGE = 4096
BASE = 0x7F0000000000


def zipf_regions(
    s: float, ws_gib: float, n_regions: int = 1000, top: float = 3.0, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, access probability per sampling interval) of the regions of a Zipf
    working set; the hottest page gets ``top`` accesses per interval."""
    n = int(ws_gib * PAGES_PER_GIB)
    r = np.unique(np.round(np.geomspace(1, n + 1, n_regions + 1)).astype(np.int64))

    def big_f(v: np.ndarray) -> np.ndarray:  # the model's continuous Zipf
        return np.log(v) if abs(s - 1) < 1e-9 else v ** (1 - s) / (1 - s)

    mass = big_f(r[1:] - 0.5) - big_f(r[:-1] - 0.5)
    size = np.diff(r)
    lam = mass / size
    lam = lam / lam.max() * top
    order = np.random.default_rng(seed).permutation(len(size))
    starts = BASE + np.concatenate([[0], np.cumsum(size[order])[:-1]]) * PAGE
    return starts, starts + size[order] * PAGE, (1 - np.exp(-lam))[order]


def damo_record(
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]],
    sample_us: int = 10,
    aggr_us: int = 2_000_000,
    seed: int = 1,
    text: bool = False,
) -> list[dict[str, Any]]:
    """damo record's JSON: ``parts`` are (start, end, probability, snapshots) in turn."""
    mx = aggr_us // sample_us
    rng = np.random.default_rng(seed)
    snaps = []
    k = 0

    def num(v: int) -> Any:
        return f"{v:,}" if text else v

    for st, en, p, n_snap in parts:
        for _ in range(n_snap):
            nr = rng.binomial(mx, p)
            t0 = k * aggr_us * 1000
            regs = [
                {
                    "start": num(int(a)),
                    "end": num(int(b)),
                    "nr_accesses": {"samples": num(int(x)), "percent": 100.0 * x / mx},
                    "age": {"usec": 0, "aggr_intervals": 0},
                }
                for a, b, x in zip(st, en, nr, strict=True)
            ]
            snaps.append(
                {
                    "start_time": num(t0),
                    "end_time": num(t0 + aggr_us * 1000),
                    "regions": regs,
                    "total_bytes": num(int((en - st).sum())),
                }
            )
            k += 1
    iv: dict[str, Any] = {"sample_us": sample_us, "aggr_us": aggr_us, "ops_update_us": 1_000_000}
    if text:
        iv = {
            "sample_us": f"{sample_us} us",
            "aggr_us": f"{aggr_us // 1_000_000} s",
            "ops_update_us": "1 s",
        }
    return [
        {"kdamond_idx": 0, "context_idx": 0, "intervals": iv, "target_id": 0, "snapshots": snaps}
    ]


def write(path: Path, data: Any, fmt: str = "json_compressed") -> Path:
    raw = json.dumps(data).encode()
    path.write_bytes(zlib.compress(raw) if fmt == "json_compressed" else raw)
    return path


def perf_script(data: list[dict[str, Any]], path: Path) -> Path:
    """The same record as ``perf script`` text of damon:damon_aggregated."""
    lines = []
    for snap in data[0]["snapshots"]:
        t = snap["end_time"] / 1e9 + 1000.0
        n = len(snap["regions"])
        for r in snap["regions"]:
            lines.append(
                f"  kdamond.0  4711 [003] {t:.6f}: damon:damon_aggregated: target_id=0 "
                f"nr_regions={n} {r['start']}-{r['end']}: {r['nr_accesses']['samples']} 3"
            )
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def zipf99(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    st, en, p = zipf_regions(0.99, 24)
    data = damo_record([(st, en, p, 60)])
    path = write(tmp_path_factory.mktemp("rec") / "damon.data", data)
    rec = read_records(path)[0]
    tenant, prov, phases = tenant_from_record(rec, "kvs", gbps=20, resident_gib=24)
    return {"data": data, "path": path, "tenant": tenant, "prov": prov, "phases": phases}


def _shares(hot: Any, ws: float) -> np.ndarray:
    return np.cumsum(bucket_access_shares(hot, ws))


@pytest.mark.parametrize("s", [0.0, 0.6, 0.99])
def test_fitted_distribution_gives_the_zipf_dram_share(s: float) -> None:
    """Hottest pages in DRAM up to each bucket edge: the DRAM access share of the
    fitted distribution is the Zipf tenant's within 2%."""
    st, en, p = zipf_regions(s, 24)
    rec = read_records_from(damo_record([(st, en, p, 60)]))
    tenant, _, phases = tenant_from_record(rec, "t", gbps=20, resident_gib=24)
    assert len(phases) == 1 and tenant["working_set_gib"] == 24.0
    z = _shares(ZipfHotness(zipf_s=s), 24)
    c = _shares(CdfHotness(**tenant["hotness"]), 24)
    np.testing.assert_allclose(c, z, rtol=0.02)


def read_records_from(data: Any) -> Any:
    from calibration.damon import _from_json

    return _from_json(data, "test", "json")[0]


def test_every_format_gives_the_same_tenant(zipf99: dict, tmp_path: Path) -> None:
    plain = write(tmp_path / "plain.json", zipf99["data"], "json")
    a = tenant_from_record(read_records(plain)[0], "kvs", gbps=20, resident_gib=24)[0]
    assert a == zipf99["tenant"]
    # older damo: numbers and times as text
    st, en, p = zipf_regions(0.99, 24)
    text = write(tmp_path / "text.data", damo_record([(st, en, p, 60)], text=True))
    b = tenant_from_record(read_records(text)[0], "kvs", gbps=20, resident_gib=24)[0]
    assert b == zipf99["tenant"]
    perf = perf_script(zipf99["data"], tmp_path / "perf.txt")
    c = tenant_from_record(
        read_records(perf, intervals=(10, 2_000_000))[0], "kvs", gbps=20, resident_gib=24
    )[0]
    np.testing.assert_allclose(c["hotness"]["cdf"], zipf99["tenant"]["hotness"]["cdf"], atol=1e-9)


def test_kv_store_from_a_damon_record_ranks_the_heuristics_the_same(zipf99: dict) -> None:
    """kv-store with its Zipf 0.99 tenant and with the tenant's hotness from the record:
    the heuristics' scores within 1%, their order the same wherever the Zipf scores
    differ by more than 0.5%, and each policy's DRAM access share within 2%."""
    from agents.rollout import rollout
    from baselines import catalogue

    kv = load_scenario("kv-store")
    d = kv.model_dump()
    d["name"] = "kv-store-damon"
    d["tenants"][0]["hotness"] = zipf99["tenant"]["hotness"]
    kvd = load_scenario(d)
    score: dict[str, dict[str, float]] = {}
    share: dict[str, dict[str, float]] = {}
    for sc in (kv, kvd):
        score[sc.name], share[sc.name] = {}, {}
        for name in catalogue.names(kind="heuristic"):
            recs = rollout(name, sc, n_episodes=2, seed=0)
            score[sc.name][name] = float(np.mean([r["metrics"]["geomean_perf"] for r in recs]))
            share[sc.name][name] = float(
                np.mean([r["tenants"]["kvs"]["dram_access_share"] for r in recs])
            )
    z, m = score["kv-store"], score["kv-store-damon"]
    for a in z:
        assert m[a] == pytest.approx(z[a], rel=0.01), a
        assert share["kv-store-damon"][a] == pytest.approx(share["kv-store"][a], rel=0.02), a
        for b in z:
            if z[a] > z[b] * 1.005:
                assert m[a] > m[b], (a, b)


def test_phases_where_the_hot_range_moves_and_the_working_set_grows(tmp_path: Path) -> None:
    st, en, p = zipf_regions(0.99, 8, seed=0)
    st2, en2, p2 = zipf_regions(0.99, 16, seed=5)  # twice the pages, hot pages elsewhere
    data = damo_record([(st, en, p, 30), (st2 + (1 << 40), en2 + (1 << 40), p2, 30)])
    rec = read_records_from(data)
    tenant, _, phases = tenant_from_record(rec, "t", gbps=10)
    assert [(ph.first, ph.last) for ph in phases] == [(0, 29), (30, 59)]
    assert tenant["phases"][0]["at_s"] == pytest.approx(60.0)
    assert tenant["working_set_gib"] == pytest.approx(8, rel=0.03)
    assert tenant["phases"][0]["working_set_gib"] == pytest.approx(16, rel=0.03)
    # a steady record is one phase
    assert len(find_phases(rec.snapshots[:30], rec.aggr_us / rec.sample_us)) == 1


def test_cli_writes_a_tenant_a_scenario_loads(zipf99: dict, tmp_path: Path) -> None:
    out = tmp_path / "tenant.yaml"
    rc = main(["damon", str(zipf99["path"]), "--gbps", "20", "--threads", "16", "--mlp", "2",
               "--resident-gib", "24", "--name", "kvs", "-o", str(out)])  # fmt: skip
    assert rc == 0
    text = out.read_text()
    assert "measured: the distribution of accesses" in text and "--gbps 20" in text
    tenant = yaml.safe_load(text)
    sc = load_scenario(
        {
            "name": "mine",
            "episode_steps": 5,
            "interval_s": 2,
            "hardware": {"preset": "spr-a1000"},
            "tenants": [tenant],
        }
    )
    p = compile_params(sc)
    assert p.n_tenants == 1
    # demand at idle local DRAM latency is the asked 20 GB/s
    t = sc.tenants[0]
    dram = next(n for n in sc.hardware.nodes if n.kind == "dram")
    demand = 64 * t.threads * t.mlp / (t.compute_ns + dram.idle_latency_ns)
    assert demand == pytest.approx(20.0, rel=1e-3)


def test_saturated_and_unseen_pages_are_reported(tmp_path: Path) -> None:
    st, en, p = zipf_regions(0.99, 24, top=50.0)  # the head saturates every interval
    rec = read_records_from(damo_record([(st, en, p, 10)], sample_us=100, aggr_us=1_000_000))
    _, _, phases = tenant_from_record(rec, "t", gbps=10, resident_gib=24)
    notes = " ".join(phases[0].notes)
    assert "every sampling interval" in notes and "never seen accessed" in notes


def test_bad_input_is_one_line(zipf99: dict, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    other = tmp_path / "machine.yaml"
    other.write_text("name: x\nnodes: []\n")
    assert main(["damon", str(other), "--gbps", "5"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "not a DAMON record" in err
    empty = write(tmp_path / "empty.data", [{"target_id": 0, "intervals": None, "snapshots": []}])
    assert main(["damon", str(empty), "--gbps", "5"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no snapshot" in err
    assert main(["damon", str(zipf99["path"])]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "relative intensity only" in err and "--gbps" in err
    assert (
        main(["damon", str(zipf99["path"]), "--gbps", "500", "--threads", "1", "--mlp", "1"]) == 2
    )
    assert "raise --threads or --mlp" in capsys.readouterr().err
    with pytest.raises(DamonError, match=r"regions\[0\]: end 5 is not after start 10"):
        read_records_from(
            [
                {
                    "target_id": 0,
                    "snapshots": [{"regions": [{"start": 10, "end": 5, "nr_accesses": 1}]}],
                }
            ]
        )


# --------------------------------------------------------------------------- the model side


def _zipf_shares_before(s: float, ws: float) -> np.ndarray:
    """bucket_access_shares' Zipf branch as it was before CdfHotness existed."""
    e = BUCKET_EDGES
    n = max(ws * PAGES_PER_GIB, 1.0)
    x = e * n + 0.5

    def cdf(v: np.ndarray) -> np.ndarray:
        if abs(s - 1.0) < 1e-9:
            return np.log(v / 0.5)
        return (v ** (1 - s) - 0.5 ** (1 - s)) / (1 - s)

    share = np.diff(cdf(x))
    return share / share.sum()


@pytest.mark.parametrize(("s", "ws"), [(0.0, 1.0), (0.99, 24.0), (1.0, 8.0), (1.2, 300.0)])
def test_zipf_shares_are_bit_for_bit_the_same(s: float, ws: float) -> None:
    got = bucket_access_shares(ZipfHotness(zipf_s=s), ws)
    assert np.array_equal(got, _zipf_shares_before(s, ws))


def test_cdf_hotness_is_read_linearly_between_its_points() -> None:
    h = CdfHotness(cdf=[0.0, 0.5, 0.8, 1.0])  # pages 0, 1/3, 2/3, 1
    got = bucket_access_shares(h, 10.0)
    want = np.diff(np.interp(BUCKET_EDGES, [0, 1 / 3, 2 / 3, 1], [0, 0.5, 0.8, 1.0]))
    np.testing.assert_allclose(got, want)
    flat = CdfHotness(cdf=[0.0, 1.0])  # uniform
    np.testing.assert_allclose(bucket_access_shares(flat, 3.0), np.diff(BUCKET_EDGES))


def _scenario(hotness: Any) -> dict[str, Any]:
    return {
        "name": "h",
        "episode_steps": 2,
        "hardware": "spr-a1000",
        "tenants": [
            {
                "name": "t",
                "threads": 1,
                "mlp": 1,
                "compute_ns": 1,
                "read_fraction": 1,
                "working_set_gib": 1,
                "hotness": hotness,
            }
        ],
    }


@pytest.mark.parametrize(
    ("hotness", "words"),
    [
        ({"cdf": [0.0, 0.2, 0.8, 1.0]}, ["tenants[0].hotness", "concave"]),
        ({"cdf": [0.1, 0.5, 1.0]}, ["tenants[0].hotness", "start at 0"]),
        ({"cdf": [0.0, 0.6, 0.5, 1.0]}, ["cdf[2]", "below"]),
        ({"cdf": [0.0, 0.7, 1.0], "pages": [0.0, 1.0]}, ["pages", "one per cdf point"]),
        ({"cdf": [0.0, 0.7, 1.0], "pages": [0.0, 0.6, 0.5]}, ["pages", "end at 1"]),
        ({"cdf": "missing.yaml"}, ["missing.yaml", "does not exist"]),
    ],
)
def test_bad_cdf_hotness_is_a_clear_error(hotness: Any, words: list[str]) -> None:
    with pytest.raises(ScenarioError) as exc:
        load_scenario(_scenario(hotness))
    for w in words:
        assert w in str(exc.value)
    assert "function-after" not in str(exc.value)


def test_cdf_file_beside_the_scenario(tmp_path: Path) -> None:
    (tmp_path / "hot.yaml").write_text("cdf: [0.0, 0.5, 0.8, 1.0]\n")
    sc_path = tmp_path / "sc.yaml"
    sc_path.write_text(yaml.safe_dump(_scenario({"cdf": "hot.yaml"})))
    sc = load_scenario(sc_path)
    assert sc.tenants[0].hotness == CdfHotness(cdf=[0.0, 0.5, 0.8, 1.0])
    # the loaded scenario dumps with the values, so it loads again anywhere
    again = load_scenario(sc.model_dump())
    assert again.tenants[0].hotness == sc.tenants[0].hotness
