// A plugin built for another plugin ABI: Tessera must refuse it before running its init.
#include <cstdio>
#include <cstdlib>

extern "C" __attribute__((visibility("default"))) int tessera_backend_plugin_abi() {
  return 999;
}
extern "C" __attribute__((visibility("default"))) void tessera_backend_plugin_init() {
  std::fputs("wrong_abi_plugin: init must not run\n", stderr);
  std::abort();
}
