# Dependencies: Debian 12 packages only (scripts/install-deps.sh installs them).
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(CLI11 REQUIRED)
find_package(OpenBLAS REQUIRED CONFIG)
# Gloo: the engine of the `gloo` distributed backend (linked privately into the library).
find_package(Gloo REQUIRED CONFIG)
# MPI: the engine of the optional `mpi` backend (Debian's libopenmpi-dev), linked privately.
# Never in sanitizer builds: OpenMPI's own allocations drown the leak check.
set(TESSERA_HAVE_MPI OFF)
if(NOT TESSERA_SANITIZE)
  enable_language(C)  # FindMPI probes the C compiler wrapper
  find_package(MPI COMPONENTS C)
  if(MPI_C_FOUND)
    set(TESSERA_HAVE_MPI ON)
  endif()
endif()

# Sleef ships no CMake config on Debian 12: find its header and library directly.
find_path(SLEEF_INCLUDE_DIR sleef.h REQUIRED)
find_library(SLEEF_LIBRARY sleef REQUIRED)
add_library(tessera_sleef INTERFACE)
target_include_directories(tessera_sleef SYSTEM INTERFACE ${SLEEF_INCLUDE_DIR})
target_link_libraries(tessera_sleef INTERFACE ${SLEEF_LIBRARY})

add_library(tessera_openblas INTERFACE)
target_include_directories(tessera_openblas SYSTEM INTERFACE ${OpenBLAS_INCLUDE_DIRS})
target_link_libraries(tessera_openblas INTERFACE ${OpenBLAS_LIBRARIES})

if(TESSERA_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(TESSERA_BUILD_BENCH)
  find_package(benchmark QUIET)
endif()
# oneDNN: a benchmark anchor of `tessera bench gemm` only, never linked into the library.
# (Debian's dnnl-config.cmake insists on OpenCL headers, which the CPU anchor does not need.)
find_library(TESSERA_DNNL_LIBRARY dnnl)
find_path(TESSERA_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)

# Python with the outside oracles (Debian's python3-torch and python3-numpy). Debian's
# interpreter is used explicitly: a pyenv or venv python3 on PATH lacks those packages.
find_program(TESSERA_ORACLE_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
