"""A C++ application of a generated header's refiner (issue 55 item 2), for the nvcc compile test and the GPU test:
fp64 NN strided batched GEMM with the table's kernels (called by their templates) and cuBLAS for LIBRARY (where
its header is). For each
problem it fills A and B, asks `Refiner::choose` twice (the second must time nothing), runs the choice and checks
C against a float64 host reference; it prints one line per problem and `ONSITE OK` when every check held."""

from __future__ import annotations

from pathlib import Path

MAIN = r"""
#define AUTOTUNE_DISPATCH_REFINE
#include "dispatch.cuh"
#if __has_include(<cublas_v2.h>)
#include <cublas_v2.h>
#define HAVE_CUBLAS 1
#endif
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>
namespace ad = autotune_dispatch;

struct Geometry { int kernel; dim3 grid, block; int smem; };

int main() {
  const long long problems[][4] = {PROBLEMS};
  const Geometry geometry[][NUM_KERNELS + 1] = {GEOMETRY};  // per problem: the fp64 NN kernels' launch geometry
  cudaStream_t stream;
  cudaStreamCreate(&stream);
#ifdef HAVE_CUBLAS
  cublasHandle_t handle;
  cublasCreate(&handle);
  cublasSetStream(handle, stream);
#endif
  ad::Refiner refiner(/*top=*/3, /*reps=*/3);
  bool ok = true;
  int p = 0;
  for (const auto& s : problems) {
    const int m = int(s[0]), n = int(s[1]), k = int(s[2]), batch = int(s[3]);
    const long long sa = 1LL * m * k, sb = 1LL * k * n, sc = 1LL * m * n;
    std::vector<double> a(sa * batch), b(sb * batch), c(sc * batch);
    std::mt19937_64 rng(p);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (auto& x : a) x = u(rng);
    for (auto& x : b) x = u(rng);
    double *da, *db, *dc;
    cudaMalloc(&da, a.size() * 8); cudaMalloc(&db, b.size() * 8); cudaMalloc(&dc, c.size() * 8);
    cudaMemcpy(da, a.data(), a.size() * 8, cudaMemcpyHostToDevice);
    cudaMemcpy(db, b.data(), b.size() * 8, cudaMemcpyHostToDevice);
    auto run = [&](int answer) {
#ifdef HAVE_CUBLAS
      if (answer == ad::LIBRARY) {
        const double one = 1.0, zero = 0.0;
        cublasDgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, da, m, sa, db, k, sb, &zero, dc, m,
                                  sc, batch);
        return;
      }
#endif
      for (const Geometry& g : geometry[p]) {
        if (g.kernel != answer) continue;
        switch (answer) {
          LAUNCHES
        }
        return;
      }
      throw answer;  // not an answer this application can launch (no cuBLAS headers): not chosen
    };
    const long long d[4] = {m, n, k, batch};
    int cand[ad::kNumKernels + 2] = {};
    const int count = ad::candidates(ad::kFp64, ad::kNN, d, 3, true, cand);
    const int before = refiner.timed();
    const int first = refiner.choose(ad::kFp64, ad::kNN, d, stream, run);
    const int timed = refiner.timed() - before;
    const int again = refiner.choose(ad::kFp64, ad::kNN, d, stream, run);
    bool listed = false;
    for (int i = 0; i < count; ++i) listed = listed || cand[i] == first;
    cudaMemset(dc, 0xff, c.size() * 8);  // NaN: an element the choice does not write fails the check
    run(first);
    cudaStreamSynchronize(stream);
    cudaMemcpy(c.data(), dc, c.size() * 8, cudaMemcpyDeviceToHost);
    double err = 0.0, scale = 0.0;
    for (int q = 0; q < batch; ++q)
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
          long double ref = 0.0L;
          for (int l = 0; l < k; ++l) ref += (long double)a[q * sa + l * m + i] * b[q * sb + j * k + l];
          const double got = c[q * sc + j * m + i];
          err = std::isfinite(got) ? std::fmax(err, std::fabs(got - (double)ref)) : INFINITY;
          scale = std::fmax(scale, std::fabs((double)ref));
        }
    const bool good = listed && timed == 1 && refiner.timed() - before == 1 && again == first && err <= 1e-12 * scale;
    std::printf("problem %d %d %d %d: candidates %d, chosen %d, timed %d, again %d, rel err %.3e %s\n", m, n, k,
                batch, count, first, timed, again, err / scale, good ? "ok" : "FAILED");
    ok = ok && good;
    cudaFree(da); cudaFree(db); cudaFree(dc);
    ++p;
  }
#ifdef HAVE_CUBLAS
  cublasDestroy(handle);
#endif
  cudaStreamDestroy(stream);
  std::printf(ok ? "ONSITE OK\n" : "ONSITE FAILED\n");
  return ok ? 0 : 1;
}
"""

LAUNCH = (
    "case {i}: {template}<<<g.grid, g.block, g.smem, stream>>>(m, n, k, 1.0, da, m, sa, db, k, sb, 0.0, dc, m, sc, "
    "batch); break;"
)


def driver(
    table: dict, problems: list[tuple[int, int, int, int]], geometry: list[dict[int, tuple]], sources: list[str]
) -> str:
    """The application's source: `geometry[p][kernel index] = ((gx, gy, gz), (bx, by, bz), smem)` for every fp64 NN
    kernel it may launch at problem p (the same kernels for every problem); `sources`: the kernels' headers."""
    kernels = sorted(geometry[0])
    rows = []
    for per in geometry:
        cells = [
            f"{{{i}, dim3({', '.join(map(str, per[i][0]))}), dim3({', '.join(map(str, per[i][1]))}), {per[i][2]}}}"
            for i in kernels
        ]
        rows.append("{" + ", ".join([*cells, "{-1, dim3(1), dim3(1), 0}"]) + "}")
    launches = "\n          ".join(LAUNCH.format(i=i, template=table["kernels"][i]["template"]) for i in kernels)
    head = "".join(f'#include "{s}"\n' for s in sources)
    return head + (
        MAIN.replace("PROBLEMS", ", ".join("{" + ", ".join(map(str, p)) + "}" for p in problems))
        .replace("NUM_KERNELS", str(len(kernels)))
        .replace("GEOMETRY", ", ".join(rows))
        .replace("LAUNCHES", launches)
    )


def fp64_nn_kernels(table: dict) -> list[int]:
    return [i for i, k in enumerate(table["kernels"]) if (k["precision"], k["shape"]) == ("fp64", "NN")]


def write_app(work: Path, header: str, source: str) -> Path:
    (work / "dispatch.cuh").write_text(header)
    cu = work / "app.cu"
    cu.write_text(source)
    return cu
