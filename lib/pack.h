#ifndef RF_PACK_H
#define RF_PACK_H
#endif
