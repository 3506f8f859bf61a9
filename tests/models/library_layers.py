"""Test models whose residuals are computed inside library code that a
checkpoint wraps directly, so JAX's frames for them hold no line of this
file (issue 30, item 14): a Linen BatchNorm under `nn.remat` whose output is
named outside it, an NNX `Linear` in bf16 under `nnx.remat`, a MaxText-style
decoder (config dataclass, helper modules tagging names, bf16, a library
attention under `nn.remat` with its policy from a config string, stacked
with `nn.scan`) and a `shard_map`'d function with a debug print under a
`jax.checkpoint`.

Each `make_*(policy)` builds the loss for the checkpoint's policy (the
oracle for a site override is the same factory with the policy changed by
hand); each registered target uses `POLICY`.
"""

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import nnx
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import remat_tui

CP = jax.checkpoint_policies
POLICY = "everything_saveable"


# ---- a Linen BatchNorm under nn.remat, its output named outside it ----------------


class Normed(nn.Module):
    policy: str

    @nn.compact
    def __call__(self, x):
        h = nn.Dense(8)(x)
        norm = nn.remat(nn.BatchNorm, policy=getattr(CP, self.policy))
        h = checkpoint_name(norm(use_running_average=False)(h), "normed")
        return jnp.tanh(h)


def make_batchnorm(policy: str = POLICY):
    model = Normed(policy)

    def loss(params, stats, x):
        y, _ = model.apply({"params": params, "batch_stats": stats}, x, mutable=["batch_stats"])
        return jnp.sum(y)

    return loss


def batchnorm_args():
    x = jax.ShapeDtypeStruct((4, 8), jnp.float32)
    variables = jax.eval_shape(Normed(POLICY).init, jax.random.key(0), x)
    return variables["params"], variables["batch_stats"], x


# ---- an NNX Linear in bf16 under nnx.remat -----------------------------------------


class TwoLayers(nnx.Module):
    def __init__(self, policy: str, rngs: nnx.Rngs):
        self.policy = policy
        self.first = nnx.Linear(8, 8, dtype=jnp.bfloat16, rngs=rngs)
        self.second = nnx.Linear(8, 8, dtype=jnp.bfloat16, rngs=rngs)

    def __call__(self, x):
        h = nnx.remat(self.first, policy=getattr(CP, self.policy))(x)
        return self.second(jnp.sin(h))


def _two_layers(policy: str):
    return nnx.split(nnx.eval_shape(lambda: TwoLayers(policy, nnx.Rngs(0))))


def make_nnx_bf16(policy: str = POLICY):
    graphdef, _ = _two_layers(policy)

    def loss(params, x):
        return jnp.sum(nnx.merge(graphdef, params)(x).astype(jnp.float32))

    return loss


def nnx_bf16_args():
    return _two_layers(POLICY)[1], jax.ShapeDtypeStruct((4, 8), jnp.float32)


# ---- a MaxText-style decoder -------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Config:
    layers: int = 2
    emb: int = 16
    heads: int = 2
    mlp: int = 32
    vocab: int = 32
    dtype: jnp.dtype = jnp.bfloat16
    remat_policy: str = POLICY


class Mlp(nn.Module):
    cfg: Config

    @nn.compact
    def __call__(self, x):
        h = checkpoint_name(nn.silu(nn.Dense(self.cfg.mlp, dtype=self.cfg.dtype)(x)), "mlpwi")
        return checkpoint_name(nn.Dense(self.cfg.emb, dtype=self.cfg.dtype)(h), "mlpwo")


class DecoderLayer(nn.Module):
    cfg: Config

    @nn.compact
    def __call__(self, inputs, _):
        cfg = self.cfg
        x = checkpoint_name(inputs, "decoder_layer_input")
        attention = nn.remat(
            nn.MultiHeadDotProductAttention,
            policy=getattr(jax.checkpoint_policies, cfg.remat_policy),
        )
        h = nn.RMSNorm(dtype=cfg.dtype)(x)
        x = x + checkpoint_name(attention(num_heads=cfg.heads, dtype=cfg.dtype)(h, h), "attn_out")
        return x + Mlp(cfg)(nn.RMSNorm(dtype=cfg.dtype)(x)), None


class Decoder(nn.Module):
    cfg: Config

    @nn.compact
    def __call__(self, tokens):
        embed = nn.Embed(self.cfg.vocab, self.cfg.emb, dtype=self.cfg.dtype)
        layers = nn.scan(
            DecoderLayer,
            variable_axes={"params": 0},
            split_rngs={"params": True},
            length=self.cfg.layers,
        )
        y, _ = layers(self.cfg, name="layers")(embed(tokens), None)
        return embed.attend(nn.RMSNorm(dtype=self.cfg.dtype)(y).astype(jnp.float32))


def make_decoder(policy: str = POLICY):
    model = Decoder(Config(remat_policy=policy))

    def loss(params, tokens):
        return -jnp.mean(jax.nn.log_softmax(model.apply({"params": params}, tokens))[..., 0])

    return loss


def decoder_args():
    tokens = jax.ShapeDtypeStruct((2, 8), jnp.int32)
    return jax.eval_shape(Decoder(Config()).init, jax.random.key(0), tokens)["params"], tokens


# ---- a shard_map'd function with a debug print, under jax.checkpoint ---------------


class Block(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.LayerNorm(dtype=jnp.bfloat16)(x)
        jax.debug.print("block input sum {}", x.sum())
        return nn.Dense(8, dtype=jnp.bfloat16)(x)


def _mesh():
    return jax.make_mesh((4,), ("data",), axis_types=(AxisType.Explicit,))


def make_shard_mapped(policy: str = POLICY):
    block = Block()

    def loss(params, x):
        def body(params, x):
            return jnp.tanh(block.apply(params, x))

        f = jax.shard_map(body, mesh=_mesh(), in_specs=(P(), P("data")), out_specs=P("data"))
        return jnp.sum(jax.checkpoint(f, policy=getattr(CP, policy))(params, x).astype(jnp.float32))

    return loss


def shard_mapped_args():
    mesh = _mesh()
    params = jax.eval_shape(Block().init, jax.random.key(0), jnp.ones((4, 8)))
    params = jax.tree.map(
        lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=NamedSharding(mesh, P())), params
    )
    x = jax.ShapeDtypeStruct((16, 8), jnp.float32, sharding=NamedSharding(mesh, P("data", None)))
    return params, x


FACTORIES = {
    "batchnorm": (make_batchnorm, batchnorm_args),
    "nnx_bf16": (make_nnx_bf16, nnx_bf16_args),
    "decoder": (make_decoder, decoder_args),
    "shard_mapped": (make_shard_mapped, shard_mapped_args),
}
for _name, (_make, _args) in FACTORIES.items():
    remat_tui.target(args=_args, name=_name)(_make())
