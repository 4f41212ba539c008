"""Thin wrappers over `prim.bind`: arrays positional, static attributes keyword-only."""

from tracegrad.core.op import constant_p
from tracegrad.ops.elementwise import (
    neg_p,
    sign_p,
    abs_p,
    floor_p,
    ceil_p,
    round_p,
    exp_p,
    exp2_p,
    expm1_p,
    log_p,
    log2_p,
    log10_p,
    log1p_p,
    sqrt_p,
    sin_p,
    cos_p,
    tan_p,
    asin_p,
    acos_p,
    atan_p,
    sinh_p,
    cosh_p,
    tanh_p,
    asinh_p,
    acosh_p,
    atanh_p,
    logistic_p,
    erf_p,
    is_finite_p,
    is_nan_p,
    is_inf_p,
    not_p,
    integer_pow_p,
    add_p,
    sub_p,
    mul_p,
    div_p,
    floor_div_p,
    gcd_p,
    mod_p,
    pow_p,
    max_p,
    min_p,
    atan2_p,
    real_p,
    imag_p,
    conj_p,
    complex_p,
    and_p,
    or_p,
    xor_p,
    shift_left_p,
    shift_right_p,
    eq_p,
    ne_p,
    lt_p,
    le_p,
    gt_p,
    ge_p,
    select_p,
    convert_element_type_p,
    stop_gradient_p,
)
from tracegrad.ops.shape_ops import (
    broadcast_in_dim_p,
    reshape_p,
    transpose_p,
    slice_p,
    rev_p,
    pad_p,
    concatenate_p,
    iota_p,
    dim_size_p,
)
from tracegrad.ops.reductions import (
    reduce_sum_p,
    reduce_prod_p,
    reduce_max_p,
    reduce_min_p,
    argmax_p,
    argmin_p,
    cumsum_p,
    cumprod_p,
    sort_p,
    argsort_p,
)
from tracegrad.ops.indexing import (
    gather_p,
    scatter_add_p,
    scatter_p,
)
from tracegrad.ops.linalg import (
    dot_general_p,
    cholesky_p,
    triangular_solve_p,
    solve_p,
    det_p,
    slogdet_p,
)
from tracegrad.ops.decompositions import (
    qr_p,
    eigh_p,
    eig_p,
    svd_p,
    lu_p,
    lu_pivots_to_permutation_p,
    expm_p,
)
from tracegrad.ops.convolution import conv_p
from tracegrad.ops.fourier import fft_p

neg = neg_p.bind
sign = sign_p.bind
abs_ = abs_p.bind
floor = floor_p.bind
ceil = ceil_p.bind
round_ = round_p.bind
exp = exp_p.bind
exp2 = exp2_p.bind
expm1 = expm1_p.bind
log = log_p.bind
log2 = log2_p.bind
log10 = log10_p.bind
log1p = log1p_p.bind
sqrt = sqrt_p.bind
sin = sin_p.bind
cos = cos_p.bind
tan = tan_p.bind
asin = asin_p.bind
acos = acos_p.bind
atan = atan_p.bind
sinh = sinh_p.bind
cosh = cosh_p.bind
tanh = tanh_p.bind
asinh = asinh_p.bind
acosh = acosh_p.bind
atanh = atanh_p.bind
logistic = logistic_p.bind
erf = erf_p.bind
is_finite = is_finite_p.bind
is_nan = is_nan_p.bind
is_inf = is_inf_p.bind
not_ = not_p.bind
integer_pow = integer_pow_p.bind
add = add_p.bind
sub = sub_p.bind
mul = mul_p.bind
div = div_p.bind
floor_div = floor_div_p.bind
gcd = gcd_p.bind
mod = mod_p.bind
pow_ = pow_p.bind
max_ = max_p.bind
min_ = min_p.bind
atan2 = atan2_p.bind
real = real_p.bind
imag = imag_p.bind
conj = conj_p.bind
complex_ = complex_p.bind
and_ = and_p.bind
or_ = or_p.bind
xor = xor_p.bind
shift_left = shift_left_p.bind
shift_right = shift_right_p.bind
eq = eq_p.bind
ne = ne_p.bind
lt = lt_p.bind
le = le_p.bind
gt = gt_p.bind
ge = ge_p.bind
select = select_p.bind
convert_element_type = convert_element_type_p.bind
stop_gradient = stop_gradient_p.bind
broadcast_in_dim = broadcast_in_dim_p.bind
reshape = reshape_p.bind
transpose = transpose_p.bind
slice = slice_p.bind
rev = rev_p.bind
pad = pad_p.bind
concatenate = concatenate_p.bind
iota = iota_p.bind
dim_size = dim_size_p.bind
reduce_sum = reduce_sum_p.bind
reduce_prod = reduce_prod_p.bind
reduce_max = reduce_max_p.bind
reduce_min = reduce_min_p.bind
argmax = argmax_p.bind
argmin = argmin_p.bind
cumsum = cumsum_p.bind
cumprod = cumprod_p.bind
sort = sort_p.bind
argsort = argsort_p.bind
gather = gather_p.bind
scatter_add = scatter_add_p.bind
scatter = scatter_p.bind
dot_general = dot_general_p.bind
cholesky = cholesky_p.bind
triangular_solve = triangular_solve_p.bind
solve = solve_p.bind
det = det_p.bind
slogdet = slogdet_p.bind
qr = qr_p.bind
eigh = eigh_p.bind
eig = eig_p.bind
svd = svd_p.bind
lu = lu_p.bind
lu_pivots_to_permutation = lu_pivots_to_permutation_p.bind
expm = expm_p.bind
fft = fft_p.bind
conv = conv_p.bind

__all__ = [
    "constant_p",
    "neg_p",
    "neg",
    "sign_p",
    "sign",
    "abs_p",
    "abs_",
    "floor_p",
    "floor",
    "ceil_p",
    "ceil",
    "round_p",
    "round_",
    "exp_p",
    "exp",
    "exp2_p",
    "exp2",
    "expm1_p",
    "expm1",
    "log_p",
    "log",
    "log2_p",
    "log2",
    "log10_p",
    "log10",
    "log1p_p",
    "log1p",
    "sqrt_p",
    "sqrt",
    "sin_p",
    "sin",
    "cos_p",
    "cos",
    "tan_p",
    "tan",
    "asin_p",
    "asin",
    "acos_p",
    "acos",
    "atan_p",
    "atan",
    "sinh_p",
    "sinh",
    "cosh_p",
    "cosh",
    "tanh_p",
    "tanh",
    "asinh_p",
    "asinh",
    "acosh_p",
    "acosh",
    "atanh_p",
    "atanh",
    "logistic_p",
    "logistic",
    "erf_p",
    "erf",
    "is_finite_p",
    "is_finite",
    "is_nan_p",
    "is_nan",
    "is_inf_p",
    "is_inf",
    "not_p",
    "not_",
    "integer_pow_p",
    "integer_pow",
    "add_p",
    "add",
    "sub_p",
    "sub",
    "mul_p",
    "mul",
    "div_p",
    "div",
    "floor_div_p",
    "floor_div",
    "gcd_p",
    "gcd",
    "mod_p",
    "mod",
    "pow_p",
    "pow_",
    "max_p",
    "max_",
    "min_p",
    "min_",
    "atan2_p",
    "atan2",
    "real_p",
    "real",
    "imag_p",
    "imag",
    "conj_p",
    "conj",
    "complex_p",
    "complex_",
    "and_p",
    "and_",
    "or_p",
    "or_",
    "xor_p",
    "xor",
    "shift_left_p",
    "shift_left",
    "shift_right_p",
    "shift_right",
    "eq_p",
    "eq",
    "ne_p",
    "ne",
    "lt_p",
    "lt",
    "le_p",
    "le",
    "gt_p",
    "gt",
    "ge_p",
    "ge",
    "select_p",
    "select",
    "convert_element_type_p",
    "convert_element_type",
    "stop_gradient_p",
    "stop_gradient",
    "broadcast_in_dim_p",
    "broadcast_in_dim",
    "reshape_p",
    "reshape",
    "transpose_p",
    "transpose",
    "slice_p",
    "slice",
    "rev_p",
    "rev",
    "pad_p",
    "pad",
    "concatenate_p",
    "concatenate",
    "iota_p",
    "iota",
    "dim_size_p",
    "dim_size",
    "reduce_sum_p",
    "reduce_sum",
    "reduce_prod_p",
    "reduce_prod",
    "reduce_max_p",
    "reduce_max",
    "reduce_min_p",
    "reduce_min",
    "argmax_p",
    "argmax",
    "argmin_p",
    "argmin",
    "cumsum_p",
    "cumsum",
    "cumprod_p",
    "cumprod",
    "sort_p",
    "sort",
    "argsort_p",
    "argsort",
    "gather_p",
    "gather",
    "scatter_add_p",
    "scatter_add",
    "scatter_p",
    "scatter",
    "dot_general_p",
    "dot_general",
    "cholesky_p",
    "cholesky",
    "triangular_solve_p",
    "triangular_solve",
    "solve_p",
    "solve",
    "det_p",
    "det",
    "slogdet_p",
    "slogdet",
    "qr_p",
    "qr",
    "eigh_p",
    "eigh",
    "eig_p",
    "eig",
    "svd_p",
    "svd",
    "lu_p",
    "lu",
    "lu_pivots_to_permutation_p",
    "lu_pivots_to_permutation",
    "expm_p",
    "expm",
    "fft_p",
    "fft",
    "conv_p",
    "conv",
]


from tracegrad.ops.shape_ops import broadcast_like, full_like, ones_like, zeros_like  # noqa: E402

__all__ += ["full_like", "zeros_like", "ones_like", "broadcast_like"]
from tracegrad.ops.custom import call_p, custom_gradient_p  # noqa: E402,F401  (registers them)
from tracegrad.ops.control_flow import cond_p, while_p  # noqa: E402,F401
from tracegrad.ops.effects import assign, assign_p  # noqa: E402

__all__ += ["assign", "assign_p"]

from tracegrad.ops.special import (  # noqa: E402
    beta_p,
    betainc_grad_a_p,
    betainc_grad_b_p,
    betainc_p,
    betaincc_p,
    betaln_p,
    digamma_p,
    erfc_p,
    erfcinv_p,
    erfinv_p,
    gamma_p,
    i0_p,
    i0e_p,
    i1_p,
    i1e_p,
    igamma_grad_a_p,
    igamma_p,
    igammac_p,
    lgamma_p,
    log_ndtr_p,
    logit_p,
    ndtr_p,
    ndtri_p,
    zeta_p,
)

lgamma = lgamma_p.bind
digamma = digamma_p.bind
erfc = erfc_p.bind
erfinv = erfinv_p.bind
ndtri = ndtri_p.bind
log_ndtr = log_ndtr_p.bind
i0e = i0e_p.bind
i1e = i1e_p.bind
igamma = igamma_p.bind
igammac = igammac_p.bind
zeta = zeta_p.bind
gamma = gamma_p.bind
erfcinv = erfcinv_p.bind
ndtr = ndtr_p.bind
logit = logit_p.bind
i0 = i0_p.bind
i1 = i1_p.bind
betaln = betaln_p.bind
beta = beta_p.bind
betainc = betainc_p.bind
betaincc = betaincc_p.bind
igamma_grad_a = igamma_grad_a_p.bind
betainc_grad_a = betainc_grad_a_p.bind
betainc_grad_b = betainc_grad_b_p.bind
__all__ += ["lgamma_p", "lgamma", "digamma_p", "digamma", "erfc_p", "erfc", "erfinv_p",
            "erfinv", "ndtri_p", "ndtri", "log_ndtr_p", "log_ndtr", "i0e_p", "i0e", "i1e_p",
            "i1e", "igamma_p", "igamma", "igammac_p", "igammac", "zeta_p", "zeta", "gamma_p",
            "gamma", "erfcinv_p", "erfcinv", "ndtr_p", "ndtr", "logit_p", "logit", "i0_p",
            "i0", "i1_p", "i1", "betaln_p", "betaln", "beta_p", "beta", "betainc_p", "betainc",
            "betaincc_p", "betaincc", "igamma_grad_a_p", "igamma_grad_a", "betainc_grad_a_p",
            "betainc_grad_a", "betainc_grad_b_p", "betainc_grad_b"]

from tracegrad.ops.random_bits import threefry2x32_p  # noqa: E402

threefry2x32 = threefry2x32_p.bind
__all__ += ["threefry2x32", "threefry2x32_p"]
