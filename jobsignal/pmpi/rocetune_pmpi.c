/* rocetune PMPI wrapper: times MPI_Allreduce, MPI_Alltoall and MPI_Barrier through MPI's
 * profiling interface and reports each call to the local rocetune agent (rocetune_job.h), with
 * no change to the program: load it with LD_PRELOAD (mpirun -x LD_PRELOAD=...) or link it
 * before libmpi. docs/job-signal.md.
 *
 * Environment: ROCETUNE_JOB_ID names the job (default "mpi"); ROCETUNE_JOB_SOCKET the agent's
 * socket (default /run/rocetune/job.sock). Each event carries the rank in MPI_COMM_WORLD and
 * the bytes this rank contributed. Reporting never blocks and never changes what the MPI call
 * returns. */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "rocetune_job.h"

/* One handle for the process; a program may call collectives from several threads
 * (MPI_THREAD_MULTIPLE), and a handle is not thread-safe: every use holds `lock`. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static rocetune_job* handle;
static int world_rank = -1;

static void open_handle(void) {
  const char* job = getenv("ROCETUNE_JOB_ID");
  int rank = -1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  pthread_mutex_lock(&lock);
  world_rank = rank;
  if (handle == NULL) handle = rocetune_job_open(NULL, job != NULL && job[0] != '\0' ? job : "mpi");
  pthread_mutex_unlock(&lock);
}

static uint64_t type_bytes(int count, MPI_Datatype type) {
  int size = 0;
  if (count <= 0 || PMPI_Type_size(type, &size) != MPI_SUCCESS || size <= 0) return 0;
  return (uint64_t)count * (uint64_t)size;
}

static void report(const char* op, double start, uint64_t bytes) {
  const double seconds = PMPI_Wtime() - start;
  pthread_mutex_lock(&lock);
  if (handle != NULL) rocetune_job_report(handle, op, seconds, world_rank, bytes);
  pthread_mutex_unlock(&lock);
}

int MPI_Init(int* argc, char*** argv) {
  const int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS) open_handle();
  return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  const int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) open_handle();
  return rc;
}

int MPI_Finalize(void) {
  pthread_mutex_lock(&lock);
  rocetune_job_close(handle);
  handle = NULL;
  pthread_mutex_unlock(&lock);
  return PMPI_Finalize();
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  const double start = PMPI_Wtime();
  const int rc = PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  if (rc == MPI_SUCCESS) report("allreduce", start, type_bytes(count, datatype));
  return rc;
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  const double start = PMPI_Wtime();
  const int rc = PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  if (rc == MPI_SUCCESS) {
    int size = 0;
    PMPI_Comm_size(comm, &size);
    /* With MPI_IN_PLACE the send count and type are ignored: the receive side describes
     * what each rank contributes. */
    const uint64_t per_peer =
        sendbuf == MPI_IN_PLACE ? type_bytes(recvcount, recvtype) : type_bytes(sendcount, sendtype);
    report("alltoall", start, per_peer * (uint64_t)(size > 0 ? size : 0));
  }
  return rc;
}

int MPI_Barrier(MPI_Comm comm) {
  const double start = PMPI_Wtime();
  const int rc = PMPI_Barrier(comm);
  if (rc == MPI_SUCCESS) report("barrier", start, 0);
  return rc;
}
