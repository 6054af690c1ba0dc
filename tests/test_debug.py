import math

import pytest
import torch
from torch import nn

from shared.debug import FirstNonFinite, NonFiniteError, anomaly_origin, format_stats, layer_stats, nonfinite_parameters


class LogOfInput(nn.Module):
    def forward(self, x):
        return x.log()


def model_with_a_log():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 4), LogOfInput()), nn.Linear(4, 2))


def test_first_nonfinite_names_the_innermost_first_module():
    model = model_with_a_log()
    with torch.no_grad():
        model[2][0].weight.fill_(-1.0)  # negative inputs to the log: NaN
    with FirstNonFinite(model) as watch:
        model(torch.ones(5, 3))
    assert watch.first is not None and watch.first.name == "2.1" and watch.first.module_type == "LogOfInput"
    assert watch.first.n_nan == 20 and watch.first.shape == (5, 4) and "2.1 (LogOfInput)" in str(watch.first)
    assert not model[0]._forward_hooks  # hooks removed on exit


def test_first_nonfinite_names_the_parent_whose_own_code_made_the_nan():
    class Parent(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner, self.out = nn.Linear(2, 2), nn.Linear(2, 2)

        def forward(self, x):
            return self.out(self.inner(x).log())  # the NaN is made here, between the two children

    model = nn.Sequential(nn.Identity(), Parent())
    with torch.no_grad():
        model[1].inner.weight.fill_(-1.0)
        model[1].inner.bias.zero_()
    with FirstNonFinite(model) as watch:
        model(torch.ones(1, 2))
    assert watch.first.name == "1" and watch.first_output.name == "1.out"  # 1.out only passed it on


def test_first_nonfinite_reports_inf_counts_passes_and_none_when_finite():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    with FirstNonFinite(model) as watch:
        model(torch.ones(1, 2))
        assert watch.first is None
        model(torch.tensor([[math.inf, 0.0]]))
    assert watch.first.name == "0" and watch.first.forward_pass == 1 and watch.first.n_inf + watch.first.n_nan > 0


def test_first_nonfinite_can_stop_at_once_and_reads_tuple_outputs():
    class Pair(nn.Module):
        def forward(self, x):
            return x, x / 0.0  # second item holds inf and NaN

    model = nn.Sequential(nn.Identity(), Pair())
    with pytest.raises(NonFiniteError, match="1 \\(Pair\\)"):
        with FirstNonFinite(model, stop=True):
            model(torch.tensor([[0.0, 1.0]]))
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        FirstNonFinite(lambda x: x)


def test_layer_stats_match_a_hand_computation():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    x = torch.randn(8, 3)
    rows = layer_stats(model, lambda m: m(x).pow(2).mean())
    assert [r.name for r in rows] == ["0", "2"]  # the ReLU has no parameters of its own
    hidden = model[0](x)
    assert rows[0].mean == pytest.approx(hidden.mean().item(), rel=1e-5)
    assert rows[0].std == pytest.approx(hidden.std().item(), rel=1e-5)
    assert rows[0].max_abs == pytest.approx(hidden.abs().max().item(), rel=1e-5)
    model.zero_grad()
    model(x).pow(2).mean().backward()
    expected = torch.cat([model[2].weight.grad.flatten(), model[2].bias.grad.flatten()]).norm().item()
    assert rows[1].grad_norm == pytest.approx(expected, rel=1e-5)
    table = format_stats(rows)
    assert table.splitlines()[0].startswith("module") and len(table.splitlines()) == 3
    everything = layer_stats(model, lambda m: m(x).sum(), keep=lambda name, m: True)
    assert [r.name for r in everything] == ["", "0", "1", "2"] and math.isnan(everything[2].grad_norm)


def test_nonfinite_parameters_and_anomaly_origin():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    assert nonfinite_parameters(model) == []
    with torch.no_grad():
        model[1].bias[0] = math.nan
    assert nonfinite_parameters(model) == ["1.bias"]

    x = torch.tensor([0.0, 1.0], requires_grad=True)

    def entropy_term():
        (x * torch.log(x)).sum().backward()  # forward 0 * -inf ... backward 0 / 0

    found = anomaly_origin(entropy_term)
    assert found.backward_function == "LogBackward0" and "torch.log(x)" in found.forward_line

    y = torch.tensor([1.0, 2.0], requires_grad=True)
    assert anomaly_origin(lambda: (y * y).sum().backward()) is None


def test_first_nonfinite_sees_keyword_inputs():
    class AddsBias(nn.Module):
        def forward(self, x, *, bias):
            return x + bias  # only passes on a NaN it was given

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.add = AddsBias()

        def forward(self, x):
            bias = torch.zeros(2).log()  # log(0) = -inf: the model's own code makes it
            return self.add(x, bias=bias)

    model = Model()
    with FirstNonFinite(model) as watch:
        model(torch.ones(1, 2))
    assert watch.first_output.name == "add"  # the first output that holds -inf
    assert watch.first.name == "" and watch.first.n_inf == 2  # but `add` got it as a keyword input
