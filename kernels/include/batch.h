/* batch: many molecular structures packed in one atom array, each described by
 * a BatchStructureDesc. One launch computes every structure's centroid and
 * radius of gyration. */
#ifndef KILN_BATCH_H
#define KILN_BATCH_H
#include "kiln.h"

/* Where one structure's atoms live in the shared atom array. 16-byte aligned
 * so that a descriptor is one aligned vector load on the GPU. Five u32 and one
 * u8 make 21 bytes of fields; alignment 16 rounds the size up to 32 (not 24). */
typedef struct __attribute__((aligned(16))) BatchStructureDesc {
    uint32_t atom_offset;  /* first atom of the structure, in atoms */
    uint32_t ca_offset;    /* first C-alpha atom, in atoms */
    uint32_t n_atoms;      /* atoms in the structure */
    uint32_t n_residues;   /* residues in the structure */
    uint32_t lineage_hash; /* caller's grouping key, carried through */
    uint8_t country_id;    /* caller's tag, carried through */
    uint8_t _pad[3];       /* explicit, so no byte of the struct is uninitialized */
} BatchStructureDesc;

KILN_STATIC_ASSERT(sizeof(BatchStructureDesc) == 32, "BatchStructureDesc is 32 bytes");
KILN_STATIC_ASSERT(KILN_ALIGNOF(BatchStructureDesc) == 16, "BatchStructureDesc is 16-byte aligned");
/* Offsets, checked by nvcc's host compiler for every .cu that includes this
 * header; the generated Rust asserts the same offsets, from clang's view. */
KILN_STATIC_ASSERT(offsetof(BatchStructureDesc, atom_offset) == 0, "atom_offset at 0");
KILN_STATIC_ASSERT(offsetof(BatchStructureDesc, ca_offset) == 4, "ca_offset at 4");
KILN_STATIC_ASSERT(offsetof(BatchStructureDesc, n_atoms) == 8, "n_atoms at 8");
KILN_STATIC_ASSERT(offsetof(BatchStructureDesc, n_residues) == 12, "n_residues at 12");
KILN_STATIC_ASSERT(offsetof(BatchStructureDesc, lineage_hash) == 16, "lineage_hash at 16");
KILN_STATIC_ASSERT(offsetof(BatchStructureDesc, country_id) == 20, "country_id at 20");
KILN_STATIC_ASSERT(offsetof(BatchStructureDesc, _pad) == 21, "_pad at 21");

/* Per structure: centroid (x, y, z) and radius of gyration. */
typedef struct BatchStats {
    float centroid[3];
    float radius_of_gyration;
} BatchStats;

KILN_STATIC_ASSERT(sizeof(BatchStats) == 16, "BatchStats is 16 bytes");
KILN_STATIC_ASSERT(offsetof(BatchStats, radius_of_gyration) == 12, "radius_of_gyration at 12");

/* One block per structure. xyz holds 3 * total_atoms floats. */
KILN_KERNEL(batch_stats, const float *xyz, uint32_t total_atoms,
            const BatchStructureDesc *descs, uint32_t n_structures, BatchStats *out);

#endif
