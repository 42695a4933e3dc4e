// rocetunectl: the operator's CLI for a rocetune controller (see `rocetunectl --help`).
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const char* user = std::getenv("USER");
  int rc = rocetune::cli::RunCli(args, user == nullptr ? "" : user, isatty(STDOUT_FILENO) == 1,
                                 std::cout, std::cerr);
  std::cout.flush();
  return rc;
}
