"""A deeper ViT in the Linen style of `vit_linen.py`, for the app's screens at
real widths (issue 30): twelve encoder blocks (the site's ×12) under a block
class with a long name, `EncoderBlockWithPreLayerNorm.__call__`, and example
arguments built at any batch (`fit` grows it). Small tensors: every screen
opens in seconds.

`make_loss(remat_policy)` builds the loss for any policy name (the oracle for
site overrides is this factory with the name changed by hand); the target
`loss` uses `REMAT_POLICY`.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

import remat_tui

DEPTH, WIDTH, HEADS, MLP_DIM, PATCH, IMAGE, BATCH, CLASSES = 12, 16, 2, 32, 4, 8, 2, 10
REMAT_POLICY = "nothing_saveable"


class FeedForwardBlock(nn.Module):
    mlp_dim: int

    @nn.compact
    def __call__(self, x):
        d = x.shape[-1]
        return nn.Dense(d)(nn.gelu(nn.Dense(self.mlp_dim)(x)))


class EncoderBlockWithPreLayerNorm(nn.Module):
    mlp_dim: int
    num_heads: int

    @nn.compact
    def __call__(self, x, deterministic=True):
        y = nn.LayerNorm()(x)
        x = x + nn.MultiHeadDotProductAttention(num_heads=self.num_heads)(y, y)
        y = FeedForwardBlock(mlp_dim=self.mlp_dim)(nn.LayerNorm()(x))
        return x + y, None


class Encoder(nn.Module):
    remat_policy: str

    @nn.compact
    def __call__(self, x, deterministic=True):
        block = nn.remat(
            EncoderBlockWithPreLayerNorm,
            prevent_cse=False,
            static_argnums=(2,),
            policy=getattr(jax.checkpoint_policies, self.remat_policy, None),
        )
        x, _ = nn.scan(
            block,
            variable_axes={"params": 0},
            split_rngs={"params": True},
            in_axes=nn.broadcast,
            length=DEPTH,
        )(name="encoderblock", mlp_dim=MLP_DIM, num_heads=HEADS)(x, deterministic)
        return nn.LayerNorm(name="encoder_norm")(x)


class ViT(nn.Module):
    remat_policy: str = REMAT_POLICY

    @nn.compact
    def __call__(self, images):
        x = nn.Conv(WIDTH, (PATCH, PATCH), strides=(PATCH, PATCH), name="embedding")(images)
        n, h, w, c = x.shape
        x = Encoder(self.remat_policy, name="Transformer")(jnp.reshape(x, (n, h * w, c)))
        return nn.Dense(CLASSES, name="head")(jnp.mean(x, axis=1))


def make_loss(remat_policy: str = REMAT_POLICY):
    """The loss of a ViT whose encoder blocks are checkpointed with the policy
    of that name."""
    model = ViT(remat_policy=remat_policy)

    def loss(params, images, labels):
        logits = model.apply({"params": params}, images)
        return optax.softmax_cross_entropy(logits, labels).mean()

    return loss


def example_args(batch: int = BATCH):
    images = jax.ShapeDtypeStruct((batch, IMAGE, IMAGE, 3), jnp.float32)
    params = jax.eval_shape(ViT().init, jax.random.key(0), images)["params"]
    return params, images, jax.ShapeDtypeStruct((batch, CLASSES), jnp.float32)


loss = remat_tui.target(args=example_args, name="loss")(make_loss())
