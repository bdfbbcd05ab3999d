// main() of tessera_tests_mpi: runs under mpirun (ctest starts it at 1-4 ranks). Every process
// joins the world group through the mpi backend (env:// without MASTER_ADDR, rank and size -1:
// mpirun did the rendezvous), runs the same tests in the same order, and leaves.
#include <gtest/gtest.h>

#include "tessera/distributed/distributed.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // The shm-only cases of the shared suite files run in the ordinary distributed binary.
  if (::testing::GTEST_FLAG(filter) == "*") ::testing::GTEST_FLAG(filter) = "-Shm*";
  namespace dist = tessera::distributed;
  // Bounded like the threaded tests: a rank that fails early cannot hold the others for the
  // default 30 minutes.
  dist::init_process_group("mpi", "env://", -1, -1, dist::Milliseconds(60'000));
  const int rc = RUN_ALL_TESTS();
  dist::destroy_process_group();
  return rc;
}
