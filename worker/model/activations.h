/* The activations a Keras config names by string ("relu", activation="gelu"), listed once.
 *
 * X(ID, keras, kernel, param, name): MW_ACT_<ID> (mw_activation) is Keras' string identifier
 * keras; kernel is the kernel table's mw_act_kind that computes it as an MW_LAYER_ACT layer
 * (kernels/kernels.h), or MW_ACT_OWN_LAYER where a layer kind of its own computes it (relu:
 * MW_LAYER_RELU; linear, softmax: MW_LAYER_IDENTITY); param is its parameter when named by
 * string (Keras 3's defaults: elu's alpha 1, leaky_relu's negative_slope 0.2); name is what the
 * summary, the model comparison and a folded layer's name ("dense/gelu") call it. Messages list
 * the identifiers in this order. A new activation on a new kernel kind is one line here. */
#ifndef MW_WORKER_MODEL_ACTIVATIONS_H
#define MW_WORKER_MODEL_ACTIVATIONS_H

#include "kernels/kernels.h"

#define MW_ACT_OWN_LAYER (-1)

#define MW_ACTIVATION_LIST(X)                                                                      \
    X(RELU, "relu", MW_ACT_OWN_LAYER, 0.0f, "relu")                                                \
    X(LINEAR, "linear", MW_ACT_OWN_LAYER, 0.0f, "linear")                                          \
    X(SOFTMAX, "softmax", MW_ACT_OWN_LAYER, 0.0f, "softmax")                                       \
    X(SIGMOID, "sigmoid", MW_ACTK_SIGMOID, 0.0f, "sigmoid")                                        \
    X(TANH, "tanh", MW_ACTK_TANH, 0.0f, "tanh")                                                    \
    X(GELU, "gelu", MW_ACTK_GELU, 0.0f, "gelu")                                                    \
    X(SILU, "silu", MW_ACTK_SILU, 0.0f, "silu")                                                    \
    X(SWISH, "swish", MW_ACTK_SILU, 0.0f, "silu")                                                  \
    X(ELU, "elu", MW_ACTK_ELU, 1.0f, "elu")                                                        \
    X(LEAKY_RELU, "leaky_relu", MW_ACTK_LEAKY_RELU, 0.2f, "leaky_relu")                            \
    X(RELU6, "relu6", MW_ACTK_RELU6, 0.0f, "relu6")                                                \
    X(HARD_SIGMOID, "hard_sigmoid", MW_ACTK_HARD_SIGMOID, 0.0f, "hard_sigmoid")                    \
    X(HARD_SILU, "hard_silu", MW_ACTK_HARD_SILU, 0.0f, "hard_silu")                                \
    X(HARD_SWISH, "hard_swish", MW_ACTK_HARD_SILU, 0.0f, "hard_silu")                              \
    X(GELU_APPROXIMATE, "gelu_approximate", MW_ACTK_GELU_TANH, 0.0f, "gelu_approximate")

#define MW_ACT_ENUM_(ID, keras, kernel, param, name) MW_ACT_##ID,
typedef enum { MW_ACTIVATION_LIST(MW_ACT_ENUM_) MW_ACT_COUNT } mw_activation;
#undef MW_ACT_ENUM_

/* One activation's row. */
typedef struct {
    const char *keras; /* Keras' string identifier */
    int kernel;        /* mw_act_kind, or MW_ACT_OWN_LAYER */
    float param;       /* its parameter when named by string */
    const char *name;  /* in the summary, the comparison and a folded layer's name */
} mw_act_info;

/* The row of a (an mw_activation below MW_ACT_COUNT). */
const mw_act_info *mw_act_info_of(mw_activation a);
/* The activation Keras names s; -1 when none. */
int mw_act_find(const char *s, mw_activation *out);
/* The name of kernel kind k (an MW_LAYER_ACT layer's act): its first row's; "?" for none. */
const char *mw_act_kernel_name(int k);
/* Every identifier, quoted and ", "-separated, for messages (static). */
const char *mw_act_supported(void);

#endif
