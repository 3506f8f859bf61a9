"""What the compile store and the worker processes keep of a compile
(Compiled.stored, read back by Compiled.from_dict) is JSON, and reads back
as the same numbers and the same forward values (core/xla/buffers/made.py)."""

import json

from remat_tui.core.xla.buffers.made import FORWARD, ForwardValue
from remat_tui.core.xla.compile.compiled import Compiled


def test_stored_numbers_and_made_values_read_back_the_same():
    made = ForwardValue(
        key="fusion.3{}",
        instruction="fusion.3",
        primitive="tanh",
        dtype="f32",
        elements=32,
        frames=(("model.py", 12), ("model.py", 30)),
        where=FORWARD,
        aliases=(("tanh", "f32", 32, (("model.py", 12),)),),
        kept=True,
        same_bytes=("copy.1{}",),
        readers=(("dot_general", "model.py", 13), ("mul", "model.py", 12)),
        recomputes=(("tanh", 32, (("model.py", 12),)),),
    )
    compiled = Compiled(
        device="cpu:0", devices=1, temp_bytes=10, argument_bytes=20, output_bytes=30,
        alias_bytes=0, generated_code_bytes=0, host_temp_bytes=0, peak_bytes=60,
        peak_source="sum", flops=1.0, seconds=0.5, made=(made,),
    )  # fmt: skip
    text = json.dumps(compiled.stored())  # what the store writes, what a worker sends
    back = Compiled.from_dict(json.loads(text))
    assert back == compiled
    assert back.made == (made,)
    assert isinstance(back.made[0].readers, tuple)
    assert hash(back.made[0])  # tuples all the way down, as a fresh compile makes them
