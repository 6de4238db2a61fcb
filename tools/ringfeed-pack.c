#include <ringfeed.h>
int main(void)
{
    return 0;
}
