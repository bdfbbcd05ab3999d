// A program that initialises MPI itself, at the thread level named by argv[1] ("funneled" or
// "serialized"), then joins the mpi backend and all-reduces: at MPI_THREAD_SERIALIZED Tessera
// uses MPI as it is (its calls serialised by a lock); below it refuses with an error naming the
// level. ctest runs it under mpirun and matches what rank 1 prints.
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <exception>

#include "tessera/distributed/distributed.h"
#include "tessera/ops/factory.h"

int main(int argc, char** argv) {
  namespace dist = tessera::distributed;
  const bool serialized = argc > 1 && std::strcmp(argv[1], "serialized") == 0;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, serialized ? MPI_THREAD_SERIALIZED : MPI_THREAD_FUNNELED,
                  &provided);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int rc = 0;
  try {
    dist::init_process_group("mpi", "env://", -1, -1, dist::Milliseconds(60'000));
    tessera::Tensor t = tessera::empty({3}, tessera::TensorOptions(tessera::kInt64));
    for (int i = 0; i < 3; ++i) t.data_ptr<int64_t>()[i] = rank + 1;
    dist::all_reduce(t);
    const int64_t want = int64_t{size} * (size + 1) / 2;
    const bool ok = t.data_ptr<int64_t>()[0] == want && t.data_ptr<int64_t>()[2] == want;
    std::printf("rank %d: all_reduce of %d ranks %s\n", rank, size, ok ? "ok" : "WRONG");
    rc = ok ? 0 : 1;
    dist::destroy_process_group();
  } catch (const std::exception& e) {
    std::printf("rank %d: %s\n", rank, e.what());
  }
  std::fflush(stdout);
  MPI_Finalize();  // the program initialised MPI, so the program finalises it
  return rc;
}
