/* The permutation NumPy's legacy generator gives: np.random.RandomState(seed).shuffle(x) on a
 * list or a 1-d array of n elements (worker/data/np_shuffle.c). Keras'
 * image_dataset_from_directory shuffles its file list with it before cutting off a
 * validation_split, so the same seed must give the same files on each side here.
 *
 * RandomState(seed) with an integer seed in [0, 2^32) seeds MT19937 with init_genrand(seed)
 * (Matsumoto and Nishimura's reference initialisation); shuffle walks i = n-1 down to 1 and
 * swaps x[i] with x[j], j = random_interval(i): the smallest all-ones mask >= i, then 32-bit
 * outputs (64-bit above 2^32 - 1: two outputs, high word first) masked until one is <= i. */
#ifndef MW_WORKER_DATA_NP_SHUFFLE_H
#define MW_WORKER_DATA_NP_SHUFFLE_H

#include <stdint.h>

/* perm[0..n) = 0..n-1 permuted as RandomState(seed).shuffle permutes a list of n: element k
 * of the shuffled list is element perm[k] of the original. */
void mw_np_shuffle(uint32_t *perm, uint32_t n, uint32_t seed);

#endif
