// Umbrella header: everything a user of Tessera's tensor library needs.
#pragma once

#include "tessera/autograd/autograd.h"
#include "tessera/core/dtype.h"
#include "tessera/core/error.h"
#include "tessera/core/half.h"
#include "tessera/core/parallel.h"
#include "tessera/core/scalar.h"
#include "tessera/core/tensor.h"
#include "tessera/core/version.h"
#include "tessera/linalg/linalg.h"
#include "tessera/nn/functional.h"
#include "tessera/nn/layers.h"
#include "tessera/nn/optim.h"
#include "tessera/ops/blas.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/fused.h"
#include "tessera/ops/pointwise.h"
#include "tessera/ops/random.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/shape.h"

namespace ts = tessera;
