/* A plain MPI program for pmpi_test: STEPS all-reduces of 1024 doubles, STEPS/10 all-to-alls
 * of 256 ints per peer and 5 barriers, then checks the all-reduce's result. It knows nothing of
 * rocetune: the wrapper is preloaded. usage: collectives_program STEPS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int steps = argc > 1 ? atoi(argv[1]) : 100;
  double in[1024], out[1024];
  for (int i = 0; i < 1024; ++i) in[i] = rank + 1;
  int* send = calloc((size_t)size * 256, sizeof(int));
  int* recv = calloc((size_t)size * 256, sizeof(int));
  for (int s = 0; s < steps; ++s) {
    MPI_Allreduce(in, out, 1024, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (s % 10 == 0) MPI_Alltoall(send, 256, MPI_INT, recv, 256, MPI_INT, MPI_COMM_WORLD);
  }
  for (int b = 0; b < 5; ++b) MPI_Barrier(MPI_COMM_WORLD);
  const double want = size * (size + 1) / 2.0;
  const int ok = out[0] == want && out[1023] == want;
  if (!ok) fprintf(stderr, "rank %d: all-reduce gave %g, want %g\n", rank, out[0], want);
  free(send);
  free(recv);
  MPI_Finalize();
  return ok ? 0 : 1;
}
