/*
 * ringfeed-producer - the helper process rf_loader_open() spawns. All of
 * its work lives in the library (rf_producer_main), so that producers and
 * consumer always run the same code.
 */
#include <ringfeed.h>

int main(int argc, char **argv)
{
    return rf_producer_main(argc, argv);
}
