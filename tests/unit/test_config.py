"""Config: one home per fact. A policy is parsed once, where it enters, and
carried parsed (PolicySpec); a device is resolved once, in Config.make, to its
canonical label, so equal devices make equal configs (one cache entry)."""

import pytest

from remat_tui.core.setup import devices, policies
from remat_tui.core.setup.config import Config
from remat_tui.errors import RematError


def test_equal_devices_make_equal_configs():
    import jax

    cpu0 = Config.make(device="cpu:0")
    assert cpu0.device == "cpu:0"
    for same in ("0", "cpu", " cpu:0 ", jax.devices("cpu")[0]):
        made = Config.make(device=same)
        assert made == cpu0 and hash(made) == hash(cpu0), same
    assert Config.make(device="0") == Config.make(device="cpu:0")
    assert Config.make(device="cpu:1") != cpu0  # conftest gives four CPU devices
    assert Config.make().device is None  # JAX's default, left unnamed


def test_equal_devices_share_one_analysis_cache_entry(mlp_target):
    import remat_tui
    from remat_tui.app.state.wanted import request_key

    by_index = remat_tui.analyze(mlp_target, policy="dots_saveable", device="0")
    by_label = remat_tui.analyze(mlp_target, policy="dots_saveable", device="cpu:0")
    assert by_index.config == by_label.config
    assert request_key("loss", by_index.config, 0) == request_key("loss", by_label.config, 0)
    assert by_index.to_dict()["device"] == by_label.to_dict()["device"]


def test_an_unknown_device_is_said_with_the_ones_available():
    with pytest.raises(RematError, match=r"unknown device 'cpu:9'; available: cpu:0"):
        Config.make(device="cpu:9")


def test_a_topology_chip_label_resolves_back_to_its_chip():
    from remat_tui.core.setup import devices

    if not devices.libtpu_installed():
        pytest.skip("needs the tpu extra (libtpu) for a deviceless topology")
    chips = devices.topology_devices("v5e:2x2")
    for chip in chips:
        label = devices.device_label(chip)
        assert devices.resolve_device(label) is chip
        assert Config.make(device=chip).device == label
    assert devices.resolve_device("tpu:v5e:2x2") is chips[0]


def test_a_config_carries_its_policies_parsed():
    sites = {"block": "save_only_these_names('b', 'a')", 2: "nothing_saveable"}
    made = Config.make("checkpoint_dots", sites)
    assert made.spec == policies.parse("dots_saveable")
    assert made.policy == "dots_saveable"  # the canonical spelling, derived from the spec
    assert made.sites == ((2, "nothing_saveable"), ("block", "save_only_these_names('a', 'b')"))
    assert dict(made.site_specs)["block"] == policies.parse("save_only_these_names('a', 'b')")
    # text already canonical (a report's, another Config's) reads back the same Config
    assert Config.make(made.policy, dict(made.sites)) == made.with_device(None)
    assert Config(made.spec, made.site_specs) == made


def test_a_config_takes_parsed_specs_only():
    """Text is parsed where it enters (Config.make); a Config given text
    says so rather than parse it again."""
    with pytest.raises(TypeError, match="Config.make"):
        Config("nothing_saveable")
    with pytest.raises(TypeError, match="Config.make"):
        Config(sites=(("block", "nothing_saveable"),))
    with pytest.raises(TypeError, match="Config.make"):
        Config.make().with_policy("nothing_saveable")
    with pytest.raises(TypeError, match="Config.make"):
        Config(structure="nested(2)")


def test_a_config_resolves_its_device_once(monkeypatch):
    import pickle

    config = Config.make(device="cpu:1")
    calls = []
    real = devices.resolve_device
    monkeypatch.setattr(devices, "resolve_device", lambda d=None: calls.append(d) or real(d))
    assert config.jax_device is config.jax_device
    assert config.jax_device.id == 1 and calls == ["cpu:1"]
    copy = pickle.loads(pickle.dumps(config))  # to a worker: the label travels, not the Device
    assert copy == config and "jax_device" not in copy.__dict__
    assert copy.jax_device == config.jax_device


def test_a_bad_site_spec_names_the_site():
    with pytest.raises(RematError, match=r"^site block: policy spec"):
        Config.make(sites={"block": "save_only_these_names(1)"})


def test_configs_made_from_specs_parse_nothing_and_neither_does_the_trace(monkeypatch, mlp_target):
    """What the app does on a key press (a new Config from a PolicySpec it
    holds, then its analysis) parses no policy text."""
    from remat_tui.core.trace.analysis import analyze

    spec = policies.parse("save_only_these_names('layer1')")
    config = Config.make(device="cpu:0")
    calls = []
    real_parse = policies.parse
    monkeypatch.setattr(policies, "parse", lambda *a, **k: calls.append(a) or real_parse(*a, **k))
    wanted = config.with_policy(spec).with_sites({})
    a = analyze(mlp_target, config=wanted)
    assert a.policy == spec.canonical and a.config == wanted
    assert calls == []
